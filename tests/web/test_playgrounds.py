"""Search and ask playgrounds in the browser, on the packaged embedding model and LLM."""

import json
import re
import threading

import httpx
import pytest

from tests.api.qa_corpus import QUESTION
from tests.web.conftest import SKIP_NO_PLAYWRIGHT, shot

expect = pytest.importorskip("playwright.sync_api", reason=SKIP_NO_PLAYWRIGHT).expect
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_search_shows_bm25_dense_fused_and_reranked_rankings_with_latencies(page, ui_url, corpus):
    page.goto(f"{ui_url}/ui/#/search?collection={corpus['collection']['id']}")
    page.get_by_label("Query").fill("humidity sensor membrane")
    page.get_by_label("Mode").select_option("hybrid")
    page.get_by_label("k (results)").fill("3")
    page.get_by_label("Rerank").select_option("llm")
    page.get_by_role("button", name="Search").click()
    rankings = page.locator("#rankings")
    for stage in ("bm25", "dense", "fused", "reranked"):
        column = rankings.locator(f"[data-stage='{stage}'] li")
        expect(column.first).to_be_visible(timeout=120_000)
        assert column.count() == 3, stage
    # BM25 puts the chunk with all three words first.
    expect(rankings.locator("[data-stage='bm25'] li").first).to_contain_text("handbook.md")
    expect(rankings.locator("[data-stage='bm25'] li").first.locator(".snippet")).to_contain_text("membrane")
    timings = page.get_by_label("Latency per stage")
    for stage in ("bm25", "embed", "dense", "rerank", "total"):
        expect(timings).to_contain_text(stage)
    expect(timings).to_contain_text(re.compile(r"\d+\.\d ms"))
    shot(page, "search-rankings")
    # Each hit opens its span in the document.
    rankings.locator("[data-stage='fused'] li a").first.click()
    expect(page.locator("mark.cited").first).to_be_visible()


def test_ask_streams_an_answer_and_a_citation_opens_the_cited_span(page, ui_url, corpus, broker_settings):
    page.goto(f"{ui_url}/ui/#/ask?collection={corpus['collection']['id']}")
    page.get_by_label("Question").fill(QUESTION)
    page.get_by_role("button", name="Ask").click()
    turn = page.locator(".turn").first  # (a locator: .last would move to the follow-up)
    expect(turn.locator(".citation-link").first).to_be_visible(timeout=180_000)
    expect(turn.locator(".answer")).to_contain_text("12 March 2026")
    expect(page.locator(".toolbar")).to_contain_text("Conversation ")
    # The claim check is shown: every sentence marked, the mode used, what the prompt held.
    expect(turn.locator(".grounding")).to_contain_text(re.compile(r"\d+ of \d+ sentences supported"))
    assert turn.locator(".claim").count() >= 1
    expect(turn.locator(".mode-line")).to_contain_text(re.compile("Answer mode: (quote|generate)"))
    # ...and which model answered (the server's generator).
    expect(turn.locator(".mode-line .model-used code")).to_have_text(broker_settings.llm_model)
    expect(turn.locator(".context-line")).to_contain_text("sources in the prompt")
    # A follow-up continues the same conversation.
    page.get_by_label("Question").fill("Which sensor does it add?")
    page.get_by_role("button", name="Ask").click()
    expect(page.locator(".turn")).to_have_count(2)
    expect(page.locator(".turn").last.locator(".timings-line")).to_be_visible(timeout=180_000)
    shot(page, "ask-conversation")

    # The marker of the release note (quote answers may cite the handbook too, in any order).
    release = corpus["documents"]["zephyr-release.txt"]["id"]
    link = turn.locator(f"a.cite[href^='#/document/{release}']").first
    expect(link).to_have_text(re.compile(r"^\[\d+\]$"))
    link.click()
    expect(page).to_have_url(re.compile(r"#/document/.+start=\d+&end=\d+"))
    expect(page.get_by_role("heading", name="zephyr-release.txt")).to_be_visible()
    cited = page.locator("mark.cited")
    expect(cited.first).to_be_visible()
    expect(cited.first).to_be_in_viewport()
    assert "12 March 2026" in " ".join(cited.all_text_contents())
    shot(page, "ask-citation-opened")
    page.go_back()  # the conversation is still there
    expect(page.locator(".turn")).to_have_count(2)
    expect(page.locator(".turn").first.locator(".answer")).to_contain_text("12 March 2026")


def test_a_question_asked_while_the_server_is_busy_waits_for_a_slot(page, ui_url, corpus, broker_settings):
    """Adaptive admission starts at one answer at a time: while another client's chat streams, the
    UI's ask gets 503 + Retry-After, says the server is busy, and asks again until it is answered."""
    held = threading.Event()

    def hold_a_slot() -> None:
        """A plain chat forced by its schema to write at least 600 characters: seconds of decoding."""
        schema = {
            "type": "object",
            "properties": {"story": {"type": "string", "minLength": 600, "maxLength": 700}},
            "required": ["story"],
        }
        with httpx.Client(base_url=ui_url, timeout=300) as client:
            body = {
                "model": broker_settings.llm_model,  # the UI server's generator
                "messages": [{"role": "user", "content": "Tell a long story about a lighthouse."}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
                "max_tokens": 400,
                "stream": True,
            }
            with client.stream("POST", "/v1/chat/completions", json=body) as response:
                assert response.status_code == 200, response.read()
                for line in response.iter_lines():
                    # NOTE: parsed, not matched as text: the chunks are compact JSON.
                    chunk = json.loads(line[len("data: ") :]) if line.startswith("data: {") else {}
                    if any(c["delta"].get("content") for c in chunk.get("choices", ())):
                        held.set()  # generating: the slot is held until the stream ends

    other = threading.Thread(target=hold_a_slot)
    other.start()
    try:
        assert held.wait(180), "the other client's answer never started generating"
        page.goto(f"{ui_url}/ui/#/ask?collection={corpus['collection']['id']}")
        page.get_by_label("Question").fill(QUESTION)
        page.get_by_role("button", name="Ask").click()
        turn = page.locator(".turn").first
        expect(turn.locator(".busy-line")).to_contain_text("asking again in", timeout=60_000)
        shot(page, "ask-busy")
        expect(turn.locator(".timings-line")).to_be_visible(timeout=240_000)
        expect(turn.locator(".busy-line")).to_have_count(0)
        expect(turn.locator(".answer")).to_contain_text("12 March 2026")
    finally:
        other.join(300)
