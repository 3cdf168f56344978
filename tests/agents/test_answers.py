"""Answers a reader can trust, with the real engine and the packaged models: quote mode is made of
source sentences under a grammar (fallback by embeddings where the backend applies none), and the
claim check tells copied sentences from invented ones."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
import xgrammar as xgr
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from xgrammar.testing import _is_grammar_accept_string

from agents.qa.claims import check_claims
from agents.qa.pipeline import AskPipeline, AskRequest
from agents.qa.quote import Candidate, candidates, first_choices, parse_quote, quote_grammar
from agents.qa.sentences import is_whole, sentence_spans
from agents.qa.sources import Source, render_source
from agents.qa.verify import engine_verifier
from inference.client import LocalChatBackend, RemoteChatBackend
from inference.provider import start_local_engine
from tests.support.http import running
from usecases.answer import embedding_similarity

ZEPHYR = (
    "Zephyr 4.2 was released on 12 March 2026 by the Aurora team. It adds support for the QX-7 humidity "
    'sensor, which Helio Labs builds. The "radio" driver no longer leaks memory.'
)
OTTERS = "Sea otters hold hands while they sleep so that they do not drift apart. Their dens are holts."
QUESTION = "When was Zephyr 4.2 released?"


def make_sources() -> list[Source]:
    return [
        Source(1, "c1", "d1", "Zephyr release notes", ZEPHYR, 0.8, char_start=40, char_end=40 + len(ZEPHYR)),
        Source(2, "c2", "d2", "Otters", OTTERS, 0.3, rank=1),
    ]


async def retrieve(query: str):
    return make_sources(), {}


def run(pipeline: AskPipeline, **request) -> list[dict]:
    async def collect():
        return [event async for event in pipeline.run(AskRequest(QUESTION, **request))]

    return asyncio.run(collect())


def assert_made_of_source_sentences(done: dict) -> None:
    """Every claim is `sentence [n]` with the sentence verbatim in the cited source, and the answer
    is exactly those claims joined."""
    assert done["answer_mode_used"] == "quote" and done["claims"], done
    by_citation = {c["citation"]: c for c in done["citations"]}
    for claim in done["claims"]:
        sentence, number = re.fullmatch(r"(.+) \[(\d+)\]", claim["text"]).groups()
        assert sentence in by_citation[int(number)]["text"], claim
        assert claim["supported"] is True and claim["method"] == "quote"
        assert done["answer"][claim["start"] : claim["end"]] == claim["text"]
    assert done["answer"] == " ".join(c["text"] for c in done["claims"])


@pytest.fixture(scope="module")
def engine(settings):
    engine = start_local_engine(settings)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def similarity(settings, retrieval_models):
    return embedding_similarity(retrieval_models, settings.embedding_model)


def test_quote_grammar_accepts_only_whole_candidates_in_order():
    source = make_sources()[0]
    cands = [Candidate(source, a, b) for a, b in sentence_spans(ZEPHYR)]
    grammar = xgr.Grammar.from_ebnf(quote_grammar(cands, 2))
    first, second, third = (c.rendered() for c in cands)
    assert _is_grammar_accept_string(grammar, first)
    assert _is_grammar_accept_string(grammar, f"{first} {third}")  # the quoted "radio" is escaped
    assert not _is_grammar_accept_string(grammar, f"{third} {first}")  # reading order only
    assert not _is_grammar_accept_string(grammar, f"{first} {first}")  # no repeats
    assert not _is_grammar_accept_string(grammar, f"{first} {second} {third}")  # at most 2
    assert not _is_grammar_accept_string(grammar, first.replace("12 March", "13 March"))
    assert parse_quote(f"{first} {third}", cands) == [cands[0], cands[2]]
    assert parse_quote(f"{first} and more", cands) is None


def test_the_opening_sentence_is_one_the_embedding_model_ranks_near_the_best():
    source = make_sources()[0]
    scores = (0.3, 0.7, 0.65)
    cands = [Candidate(source, a, b, s) for (a, b), s in zip(sentence_spans(ZEPHYR), scores, strict=True)]
    assert first_choices(cands, 0.1) == {1, 2}
    grammar = xgr.Grammar.from_ebnf(quote_grammar(cands, 2, first_choices(cands, 0.1)))
    first, second, third = (c.rendered() for c in cands)
    assert not _is_grammar_accept_string(grammar, first)  # ranked 0.4 below the best
    assert not _is_grammar_accept_string(grammar, f"{first} {second}")
    assert _is_grammar_accept_string(grammar, second)
    assert _is_grammar_accept_string(grammar, f"{second} {third}")
    assert _is_grammar_accept_string(grammar, third)


def test_quote_candidates_come_from_the_best_scoring_sources(similarity):
    sources = make_sources()
    everywhere = candidates(QUESTION, sources, 16, similarity)
    assert {c.source.number for c in everywhere} == {1, 2}
    best = candidates(QUESTION, sources, 16, similarity, max_sources=1)
    assert {c.source.number for c in best} == {1} and len(best) == 3
    # The retrieval rank counts too: a big enough penalty per place moves the choice to the
    # first-ranked source even when the question is about the other one.
    otters = "Why do sea otters hold hands?"
    assert {c.source.number for c in candidates(otters, sources, 16, similarity, 1)} == {2}
    assert {c.source.number for c in candidates(otters, sources, 16, similarity, 1, rank_weight=1.0)} == {1}


def test_headings_titles_and_labels_are_not_quoted(similarity):
    """They score close to a question that names their topic, and answer nothing."""
    # All three pass the character bounds. The title and the heading have 4+ words: only their role
    # keeps them out. The label has two.
    title, heading = "The Zephyr 4.2 release notes", "When Zephyr 4.2 was released"
    label = "Zephyr-4.2 release-date"
    text = f"{title}\n\n## {heading}\n\n{label}\n\n{ZEPHYR}"
    source = Source(1, "c1", "d1", title, text, 0.8, headings=("Notes", heading))
    quoted = {c.text for c in candidates(QUESTION, [source], 16, similarity)}
    assert quoted == {ZEPHYR[a:b] for a, b in sentence_spans(ZEPHYR)}


def test_sentences_cut_by_a_chunk_boundary_are_not_whole():
    text = "URL, Groundwork starts an embedded server. It runs migrations. Then it starts the worker and"
    first, middle, last = sentence_spans(text)
    # The chunk began inside a sentence ("... set no database URL, ...") and ends inside another.
    assert not is_whole(text, *first, lead="If you set no database ", trail=" the API.")
    assert is_whole(text, *middle, lead="If you set no database ", trail=" the API.")
    assert not is_whole(text, *last, lead="If you set no database ", trail=" the API.")
    # At the document's start and end, after a sentence or a line break, they are whole.
    assert is_whole(text, *first, lead="", trail="")
    assert is_whole(text, *first, lead="It is one command. ", trail="\nNext line")
    assert is_whole(text, *first, lead="## Start\n", trail="")
    assert is_whole(text, *last, lead="", trail="\n\n## Next")
    # A last sentence that ends with its full stop, followed by a space in the document, is whole;
    # one that a cut left without the rest of its line is not.
    done = "It ends here."
    assert is_whole(done, 0, len(done), lead="", trail=" And more.")
    cut = "It ends here"
    assert not is_whole(cut, 0, len(cut), lead="", trail=". And more.")


def test_quote_candidates_never_start_or_end_mid_sentence(similarity):
    text = "URL, Groundwork starts an embedded PostgreSQL server. It then runs the schema migrations first"
    source = Source(1, "c1", "d1", "Start", text, 0.8, char_start=120, lead="no database ", trail=" of all.")
    quoted = [c.text for c in candidates("What does groundwork start?", [source], 16, similarity)]
    assert quoted == []  # both sentences were cut: nothing is quotable
    whole = Source(1, "c1", "d1", "Start", text, 0.8, char_start=0, lead="", trail="")
    assert len(candidates("What does groundwork start?", [whole], 16, similarity)) == 2


def test_quote_answer_is_verbatim_source_sentences_streaming_too(settings, engine, similarity):
    pipeline = AskPipeline(retrieve, LocalChatBackend(engine), settings.qa, similarity)
    events = run(pipeline, answer_mode="quote")
    done = events[-1]
    assert_made_of_source_sentences(done)
    assert done["quote_method"] == "grammar" and done["fallback"] is None
    assert "12 March 2026" in done["answer"]
    streamed = "".join(e["text"] for e in events if e["type"] == "token")
    assert len([e for e in events if e["type"] == "token"]) > 1  # token by token, not one block
    sources = make_sources()
    qa = settings.qa
    cands = candidates(
        QUESTION, sources, qa.quote_candidates, similarity, qa.quote_max_sources, qa.quote_rank_weight
    )
    assert parse_quote(streamed, cands) is not None, streamed  # the stream itself obeys the grammar
    # auto quotes with the packaged 135M generator
    assert run(pipeline)[-1]["answer_mode_used"] == "quote"


def test_claim_check_marks_invented_sentences_and_keeps_copied_ones(settings, engine):
    sources = make_sources()
    citations = [{"citation": 1, "source_number": 1}]
    answer = (
        "Zephyr 4.2 was released on 12 March 2026 by the Aurora team [1]. "
        "Zephyr 4.2 was released in 1999 by NASA [1]. "
        "Helio Labs makes the humidity sensor that Zephyr 4.2 newly supports [1]. "
        "Sea otters hold hands while they sleep."
    )
    claims = asyncio.run(check_claims(answer, citations, sources, engine_verifier(LocalChatBackend(engine))))
    copied, invented, paraphrase, uncited = claims
    assert copied["supported"] is True and copied["evidence"]["text"].startswith("Zephyr 4.2 was released")
    assert copied["evidence"]["char_start"] == 40  # located in the document, not only in the chunk
    assert invented["supported"] is False and invented["verdict"] == "unsupported"
    assert paraphrase["method"] == "model" and paraphrase["supported"] in (True, False)
    # an uncited sentence is checked against every source
    assert uncited["supported"] is True and uncited["evidence"]["source_number"] == 2


def _stub_app(reject: bool) -> FastAPI:
    """An OpenAI-compatible server that ignores structured outputs (or rejects them)."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        if reject and "structured_outputs" in body:
            return JSONResponse({"error": {"message": "structured_outputs unsupported"}}, status_code=400)

        def chunks():
            for delta in ({"content": "Zephyr came out "}, {"content": "some time ago."}):
                choice = {"index": 0, "delta": delta, "finish_reason": None}
                yield f"data: {json.dumps({'id': 'x', 'object': 'chat.completion.chunk', 'created': 0, 'model': 'stub', 'choices': [choice]})}\n\n"  # noqa: E501
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            choice = {"index": 0, "delta": {}, "finish_reason": "stop"}
            yield f"data: {json.dumps({'id': 'x', 'object': 'chat.completion.chunk', 'created': 0, 'model': 'stub', 'choices': [choice], 'usage': usage})}\n\n"  # noqa: E501
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return app


@pytest.mark.parametrize("reject", [False, True], ids=["ignores", "rejects"])
def test_remote_backend_without_grammars_falls_back_and_says_so(settings, similarity, reject):
    with running(_stub_app(reject)) as url:

        async def ask_twice():
            # NOTE: one event loop for both: the OpenAI client's connections belong to it.
            pipeline = AskPipeline(retrieve, RemoteChatBackend(f"{url}/v1", "stub"), settings.qa, similarity)
            quote = [e async for e in pipeline.run(AskRequest(QUESTION, answer_mode="quote"))]
            auto = [e async for e in pipeline.run(AskRequest(QUESTION))]
            return quote, auto[-1]

        events, auto = asyncio.run(ask_twice())
    done = events[-1]
    assert_made_of_source_sentences(done)
    assert done["quote_method"] == "embedding"
    assert ("rejected" if reject else "did not follow") in done["fallback"]
    assert "12 March 2026" in done["answer"]  # the embedding model picked the answering sentence
    assert "".join(e["text"] for e in events if e["type"] == "token") == done["answer"]
    # auto does not quote with a remote generator of unknown size: it generates and checks
    assert auto["answer_mode_used"] == "generate" and auto["claims"][0]["supported"] is False


def test_every_answer_reports_its_context_and_what_was_left_out(settings, engine, similarity):
    backend = LocalChatBackend(engine)
    pipeline = AskPipeline(retrieve, backend, settings.qa, similarity)
    zephyr_only = backend.count_tokens(render_source(make_sources()[0])) + 1
    turns = [{"role": r, "content": f"turn {i}"} for i, r in enumerate(["user", "assistant"] * 6)]
    done = run(pipeline, answer_mode="quote", sources_token_budget=zephyr_only, history=turns)[-1]
    context = done["context"]
    assert [s["chunk_id"] for s in context["sources"]] == ["c1"]
    assert [d["chunk_id"] for d in context["dropped_sources"]] == ["c2"]
    assert "sources budget" in context["dropped_sources"][0]["reason"]
    assert context["sources_tokens"] <= context["token_budget"] == zephyr_only
    assert (context["retrieved"], context["used"]) == (2, 1)
    kept_turns = settings.qa.history_turns
    assert context["history_turns"] == kept_turns
    assert context["history_dropped_turns"] == len(turns) - kept_turns
    assert context["system_tokens"] > 0 and context["question_tokens"] > 0
