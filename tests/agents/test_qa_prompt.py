import pytest

from agents.qa.citations import resolve_citations
from agents.qa.followups import keeps_subject, standalone
from agents.qa.prompt import INSTRUCTIONS, build_messages
from agents.qa.sources import Source, fit_to_budget, order_for_attention

pytestmark = pytest.mark.unit


def _sources(n: int) -> list[Source]:
    return [Source(i + 1, f"c{i}", f"d{i}", f"Doc {i}", f"text of chunk {i}", 1.0 - i / 10) for i in range(n)]


def test_best_sources_sit_at_both_ends_and_are_renumbered_top_to_bottom():
    ranked = _sources(5)  # chunk ids c0 (best) .. c4 (worst)
    ordered = order_for_attention(ranked)
    assert [s.chunk_id for s in ordered] == ["c0", "c2", "c4", "c3", "c1"]
    assert [s.number for s in ordered] == [1, 2, 3, 4, 5]


def test_budget_keeps_best_sources_that_fit():
    ranked = _sources(4)
    ranked[1].text = "x " * 500  # too long for the budget
    kept = fit_to_budget(ranked, budget_tokens=40, count_tokens=lambda s: len(s.split()))
    assert [s.chunk_id for s in kept] == ["c0", "c2", "c3"]


def test_prompt_prefix_is_identical_across_questions_and_sources_precede_history():
    a = build_messages("q1?", _sources(2))
    b = build_messages("another?", _sources(3), history=[{"role": "user", "content": "hi"}])
    assert a[0]["content"].startswith(INSTRUCTIONS) and b[0]["content"].startswith(INSTRUCTIONS)
    assert "[1] Doc 0" in a[0]["content"]
    assert [m["role"] for m in b] == ["system", "user", "user"] and b[-1]["content"] == "another?"


def test_citations_are_renumbered_by_appearance_and_invalid_ones_dropped():
    sources = _sources(3)
    result = resolve_citations("Alpha [3]. Beta [1, 3] and gamma [7].", sources)
    assert result.answer == "Alpha [1]. Beta [2][1] and gamma."
    assert [(c["citation"], c["source_number"], c["chunk_id"]) for c in result.citations] == [
        (1, 3, "c2"),
        (2, 1, "c0"),
    ]
    assert result.invalid == [7]
    assert result.citations[0]["quote"] == "text of chunk 2"


def test_uncited_sentences_get_the_source_they_copy_flagged_as_attributed():
    from agents.qa.attribution import attribute

    sources = _sources(2)
    sources[0].text = "Zephyr 4.2 was released on 12 March 2026 with the QX-7 sensor driver."
    sources[1].text = "Owls fly silently because their feathers have soft fringed edges."
    answer = "Zephyr 4.2 was released on 12 March 2026. Owls fly silently [2]. I like turtles very much."
    text, added = attribute(answer, sources)
    assert (
        text
        == "Zephyr 4.2 was released on 12 March 2026 [1]. Owls fly silently [2]. I like turtles very much."
    )
    assert added == {1}


def test_follow_up_rewrites_that_lose_the_subject_are_not_used():
    history = [
        {"role": "user", "content": "What is new in Zephyr 4.2?"},
        {"role": "assistant", "content": "Zephyr 4.2 adds the QX-7 sensor [1]."},
    ]
    question = "Which sensor does it add?"
    good = "Which sensor does Zephyr 4.2 add?"
    assert standalone(question, good, history) == (good, "rewrite")
    lost = "The user's last question is about the user's last question."
    joined = "What is new in Zephyr 4.2? Which sensor does it add?"
    assert standalone(question, lost, history) == (joined, "joined")
    assert standalone(question, question, history) == (joined, "joined")  # "it" left unresolved
    assert standalone(question, "Zephyr release dates", history) == (joined, "joined")  # question lost
    assert standalone(question, "", history) == (joined, "joined")
    assert keeps_subject(question, f"{good}\nA second line is ignored by standalone, not here")
