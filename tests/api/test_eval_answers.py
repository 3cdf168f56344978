"""Answer evaluations through the real /v1/ask pipeline in the worker (packaged models), feedback
on answers turned into an answer-eval dataset, and the PubMedQA loader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.deps import DEFAULT_TENANT_ID
from core.database import session_scope
from core.models import Conversation, Message
from evals.datasets import load_answers
from tests.api.qa_corpus import DOCS, QUESTION
from tests.api.test_evals import create_run, upload_dataset, wait_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PUBMEDQA = Path(__file__).resolve().parents[3] / "shared" / "eval" / "pubmedqa"


def test_answer_run_scores_answers_citations_and_refusals(client, celery_worker):
    corpus = "\n".join(json.dumps({"_id": name, "text": data.decode()}) for name, data in DOCS.items())
    items = [
        {
            "id": "release",
            "question": QUESTION,
            "answer": "12 March 2026",
            "gold_doc_ids": ["zephyr-release.txt"],
        },
        {"id": "cake", "question": "What is the best recipe for chocolate cake?", "answer": None},
    ]
    files = [
        ("files", ("items.jsonl", "\n".join(json.dumps(i) for i in items).encode())),
        ("files", ("corpus.jsonl", corpus.encode())),
    ]
    path = upload_dataset(client, files)
    body = {
        "kind": "answer",
        "dataset": {"path": path, "format": "jsonl"},
        "generation": {"max_tokens": 48},
        "judge": {"repeats": 2},
    }
    # The judge's cost is shown before anything runs, and asking creates nothing.
    runs_before = len(client.get("/v1/evals").json())
    estimate = client.post("/v1/evals/estimate", json=body).json()
    assert estimate["items"] == 2 and estimate["judge_verdicts"] == 2 * 2 * 3 and estimate["judge_tokens"] > 0
    assert len(client.get("/v1/evals").json()) == runs_before
    run = wait_run(client, create_run(client, **body)["id"], timeout=600)
    assert run["status"] == "succeeded", run["error"]
    by_key = {i["item_key"]: i for i in client.get(f"/v1/evals/{run['id']}/items").json()}
    release, cake = by_key["release"], by_key["cake"]
    assert "12 March 2026" in release["output"]["answer"]
    assert release["metrics"]["contains_gold"] == 1.0 and release["metrics"]["token_f1"] > 0
    assert release["output"]["cited_docs"][0] == "zephyr-release.txt"
    assert release["metrics"]["citation_recall"] == 1.0 and release["tokens"] > 0
    assert cake["metrics"]["no_answer_accuracy"] == 1.0 and cake["metrics"]["token_f1"] is None
    # Model-judged faithfulness, labelled so, with its spread over the two judgings.
    judged = release["metrics"]["faithfulness_model_judged"]
    assert 0.0 <= judged <= 1.0 and release["metrics"]["faithfulness_model_judged_std"] >= 0.0
    assert release["output"]["judge_tokens"] > 0
    assert "faithfulness_model_judged" not in cake["metrics"]  # a refusal states nothing to judge
    assert run["config"]["estimate"] == estimate
    metrics = run["metrics"]
    assert metrics["no_answer_accuracy"] == 1.0 and metrics["contains_gold"] == 1.0
    assert metrics["latency_ms_p99"] >= metrics["latency_ms_p50"] > 0 and metrics["tokens_total"] > 0


def test_negative_feedback_becomes_an_answer_dataset(client, session_factory, settings):
    with session_scope(session_factory) as session:
        conv = Conversation(tenant_id=DEFAULT_TENANT_ID, collection_ids=[], title="t")
        session.add(conv)
        session.flush()
        session.add(
            Message(
                conversation_id=conv.id, role="user", content=QUESTION, citations=[], usage={}, timings={}
            )
        )
        session.flush()
        answer = Message(
            conversation_id=conv.id,
            role="assistant",
            content="It was released in 2025.",
            query=QUESTION,
            citations=[{"source_id": "otters.txt"}],
            usage={},
            timings={},
        )
        session.add(answer)
        session.flush()
        message_id = str(answer.id)
    down = {"rating": "down", "comment": "wrong year", "corrected_answer": "12 March 2026"}
    assert client.post(f"/v1/messages/{message_id}/feedback", json=down).status_code == 201
    assert client.post(f"/v1/messages/{message_id}/feedback", json={"rating": "down"}).status_code == 201
    assert client.post(f"/v1/messages/{message_id}/feedback", json={"rating": "meh"}).status_code == 422
    missing = client.post("/v1/messages/00000000-0000-0000-0000-000000000000/feedback", json={"rating": "up"})
    assert missing.status_code == 404
    made = client.post("/v1/evals/datasets/from-feedback", json={"rating": "down"}).json()
    assert made["items"] >= 1 and made["skipped_without_correction"] >= 1
    loaded = load_answers(settings.data_dir / "evals" / made["path"], "jsonl")
    mine = [i for i in loaded.items if i.question == QUESTION and i.answer == "12 March 2026"]
    assert mine, loaded.items


@pytest.mark.skipif(not PUBMEDQA.exists(), reason="../shared/eval/pubmedqa is not here")
def test_pubmedqa_loader():
    data = load_answers(PUBMEDQA, "pubmedqa")
    assert len(data.items) == 500 and len(data.corpus) == 1000
    item = data.items[0]
    assert item.gold_docs == [item.key] and item.answer and item.key in {d.source_id for d in data.corpus}
    dev = load_answers(PUBMEDQA, "pubmedqa", "dev")  # the pool benchmarks.answers tunes on
    assert len(dev.items) == 500 and not {i.key for i in dev.items} & {i.key for i in data.items}
    assert "\n\n" in dev.corpus[0].text  # the contexts stay paragraphs
