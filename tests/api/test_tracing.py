"""Traces of real requests, captured with the SDK's in-memory exporter (the API in this process) and
over OTLP/HTTP from a real Celery worker: span names, parents, GenAI attributes, and no question or
document text unless the operator opts in."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from api.main import create_app
from core.settings.observability import TracingSettings
from core.tracing import configure_tracing, disable_tracing
from ingestion.uploads import INGEST_TASK
from tests.api.qa_corpus import DOCS, QUESTION
from tests.ingestion.helpers import create_collection, wait_job
from tests.support.otlp import otlp_receiver
from tests.support.services import WorkerProcess, unique_name, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def exporter():
    memory = InMemorySpanExporter()
    configure_tracing(TracingSettings(enabled=True), "groundwork-api", exporter=memory)
    yield memory
    disable_tracing()


@pytest.fixture
def spans(exporter):
    exporter.clear()
    yield exporter


class Tree:
    """The finished spans of one trace, by name, with their parents."""

    def __init__(self, finished, trace_id: str) -> None:
        self.spans = [s for s in finished if format(s.context.trace_id, "032x") == trace_id]
        assert self.spans, f"no spans of trace {trace_id}"
        self.by_id = {s.context.span_id: s for s in self.spans}

    def named(self, name: str):
        found = [s for s in self.spans if s.name == name]
        assert found, f"no span {name!r} in {sorted({s.name for s in self.spans})}"
        return found

    def one(self, name: str):
        return self.named(name)[0]

    def parent(self, span):
        return self.by_id.get(span.parent.span_id) if span.parent else None

    def ancestors(self, span) -> list[str]:
        names = []
        while (span := self.parent(span)) is not None:
            names.append(span.name)
        return names

    def text(self) -> str:
        return " ".join(str(v) for s in self.spans for v in s.attributes.values())


def _no_content(tree: Tree, *texts: str) -> None:
    exported = tree.text()
    for text in texts:
        assert text not in exported, f"{text[:40]!r} was exported without the content opt-in"


def test_ask_trace_has_every_stage_under_the_request(client, qa_collection, spans):
    resp = client.post("/v1/ask", json={"collection": qa_collection, "question": QUESTION})
    assert resp.status_code == 200, resp.text
    tree = Tree(spans.get_finished_spans(), resp.headers["x-trace-id"])
    root = tree.one("POST /v1/ask")
    assert root.parent is None and root.kind is SpanKind.SERVER
    assert root.attributes["http.route"] == "/v1/ask" and root.attributes["http.response.status_code"] == 200
    assert root.attributes["groundwork.slo.met"] in (True, False)
    for name in ("auth", "rate_limit", "retrieval", "qa.prompt"):
        assert tree.ancestors(tree.one(name))[-1] == "POST /v1/ask", name
    for stage in ("retrieval.bm25", "retrieval.embed", "retrieval.dense", "retrieval.fusion"):
        assert tree.ancestors(tree.one(stage))[:2] == ["retrieval.search", "retrieval"], stage
    assert tree.parent(tree.one("retrieval.neighbors")).name == "retrieval"
    [chat] = [s for s in tree.spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert chat.name == f"chat {chat.attributes['gen_ai.request.model']}" and chat.kind is SpanKind.CLIENT
    usage = resp.json()["usage"]
    assert chat.attributes["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert chat.attributes["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
    assert chat.attributes["gen_ai.response.finish_reasons"] == (resp.json()["finish_reason"],)
    engine = [tree.one(n) for n in ("engine.queue", "engine.prefill", "engine.decode")]
    assert all(tree.parent(s) is chat for s in engine)
    assert engine[0].end_time <= engine[1].end_time <= engine[2].end_time <= chat.end_time
    if resp.json()["answer_mode_used"] == "generate":
        assert tree.parent(tree.one("qa.claim_check")) is root
    _no_content(tree, QUESTION, *(d.decode()[:60] for d in DOCS.values()))


def test_agent_run_traces_its_steps_and_tool_calls(client, qa_collection, spans):
    body = {
        "input": QUESTION,
        "collections": [qa_collection],
        "agent": "react",
        "tools": ["search"],
        "budgets": {"max_steps": 1, "max_repeats": 10},
    }
    resp = client.post("/v1/agents/runs", json=body)
    assert resp.status_code == 200, resp.text
    assert any(s["type"] == "tool_call" and s["name"] == "search" for s in resp.json()["trace"])
    tree = Tree(spans.get_finished_spans(), resp.headers["x-trace-id"])
    agent = tree.one("invoke_agent react")
    assert tree.parent(agent).name == "POST /v1/agents/runs"
    assert agent.attributes["gen_ai.agent.name"] == "react"
    step = tree.one("agent.step")
    assert tree.parent(step) is agent and step.attributes["groundwork.agent.node"]
    assert any(
        tree.parent(s) is step for s in tree.spans if s.attributes.get("gen_ai.operation.name") == "chat"
    )
    tool = tree.one("execute_tool search")
    assert tree.parent(tool) is agent
    assert tool.attributes["gen_ai.tool.name"] == "search" and tool.attributes["gen_ai.tool.call.id"]
    assert "execute_tool search" in tree.ancestors(tree.one("retrieval.search"))
    _no_content(tree, QUESTION)


class TracedWorker(WorkerProcess):
    def __init__(self, *args, endpoint: str) -> None:
        super().__init__(*args)
        self.endpoint = endpoint

    def env(self) -> dict[str, str]:
        return {
            **super().env(),
            "GROUNDWORK_TRACING__ENABLED": "true",
            "GROUNDWORK_TRACING__OTLP_ENDPOINT": self.endpoint,
            "GROUNDWORK_TRACING__EXPORT_DELAY_MS": "100",
        }


def test_upload_trace_continues_in_the_worker(broker_settings, database_url, tmp_path, spans):
    settings = broker_settings.model_copy(update={"celery_queue": unique_name("gwq_trace")})
    secret = b"The heliotrope valve opens at forty-two kilopascals on the Quillon rig."
    with otlp_receiver() as (endpoint, received):
        worker = TracedWorker(settings, database_url, tmp_path / "worker.log", endpoint=endpoint)
        worker.start()
        try:
            with TestClient(create_app(settings)) as api:
                worker.wait_ready(api.app.state.groundwork.celery, timeout=120)
                create_collection(api, "traced-uploads")
                resp = api.post(
                    "/v1/collections/traced-uploads/documents",
                    files=[("files", ("valve.txt", secret, "text/plain"))],
                )
                assert resp.status_code == 202, resp.text
                assert wait_job(api, resp.json()["job_id"])["documents_done"] == 1
            trace_id = resp.headers["x-trace-id"]
            stages = {"ingest.parse", "ingest.chunk", "ingest.embed", "ingest.store"}
            task_name = f"task {INGEST_TASK}"

            def exported() -> bool:
                return {task_name, *stages} <= {s.name for s in received.snapshot() if s.trace_id == trace_id}

            wait_until(exported, timeout=30, message=f"worker spans; log:\n{worker.log_tail()}")
        finally:
            worker.stop()
    upload_span = Tree(spans.get_finished_spans(), trace_id).one(
        "POST /v1/collections/{collection}/documents"
    )
    worker_spans = {s.span_id: s for s in received.snapshot() if s.trace_id == trace_id}
    [task] = [s for s in worker_spans.values() if s.name == task_name]
    assert (
        task.parent_id == format(upload_span.context.span_id, "016x") and task.service == "groundwork-worker"
    )
    for stage in stages:
        [s] = [w for w in worker_spans.values() if w.name == stage]
        assert worker_spans[s.parent_id] is task, stage
    parse = next(s for s in worker_spans.values() if s.name == "ingest.parse")
    assert parse.attributes["groundwork.bytes"] == len(secret) and parse.attributes["groundwork.document_id"]
    assert "parsed.text" not in " ".join(parse.attributes)
    assert secret.decode()[:30] not in " ".join(
        str(v) for s in worker_spans.values() for v in s.attributes.values()
    )
