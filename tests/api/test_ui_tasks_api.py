"""The API additions of issue 30 (what the UI needed to finish its tasks): conversations listed and
read back with their claim checks, accepted upload types, auth flag, live key counts, failed and
retryable documents, a job's start time."""

import pytest

from agents.qa.store import record_turn
from api.deps import DEFAULT_TENANT_ID
from core.database import session_scope
from core.models import EvalRun, JobStatus
from tests.ingestion.helpers import create_collection, upload, wait_job
from tests.ingestion.samples import CORRUPT_PDF

pytestmark = pytest.mark.integration

CLAIMS = [
    {"text": "Batteries last ten years.", "supported": False, "verdict": "unsupported", "evidence": None}
]


def test_conversations_are_listed_newest_first_and_read_back_with_their_claims(client, session_factory):
    done = {"answer": "Batteries last ten years.", "citations": [], "usage": {}, "timings": {}}
    with session_scope(session_factory) as session:
        older, _ = record_turn(session, DEFAULT_TENANT_ID, None, [], "first question", done, "first question")
        newer, message = record_turn(
            session,
            DEFAULT_TENANT_ID,
            None,
            [],
            "How long?",
            {**done, "claims": CLAIMS, "answer_mode_used": "generate"},
            "How long?",
        )
        record_turn(session, DEFAULT_TENANT_ID, older, [], "a follow-up", done, "first question, follow-up")
        older_id, newer_id, message_id = str(older.id), str(newer.id), str(message.id)
    listed = [c["id"] for c in client.get("/v1/conversations").json()]
    assert listed.index(older_id) < listed.index(newer_id)  # its follow-up came last
    detail = client.get(f"/v1/conversations/{newer_id}").json()
    assert detail["messages"] == 2 and [t["role"] for t in detail["turns"]] == ["user", "assistant"]
    answer = detail["turns"][1]
    assert (answer["id"], answer["answer_mode"], answer["claims"]) == (message_id, "generate", CLAIMS)
    follow_up = client.get(f"/v1/conversations/{older_id}").json()["turns"][3]
    assert follow_up["query"] == "first question, follow-up"  # the rewritten question, shown in the UI
    missing = client.get("/v1/conversations/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "conversation_not_found"


def test_formats_list_the_parsers_kinds_with_extensions(client):
    formats = {f["kind"]: f for f in client.get("/v1/ingestion/formats").json()["formats"]}
    assert {"pdf", "docx", "pptx", "xlsx", "markdown", "text", "html"} <= set(formats)
    assert ".docx" in formats["docx"]["extensions"] and ".md" in formats["markdown"]["extensions"]
    assert ".pptx" in formats["pptx"]["extensions"]  # a parser's kind appears by itself
    assert not any(".exe" in f["extensions"] or ".bin" in f["extensions"] for f in formats.values())


def test_tenant_says_whether_auth_is_required_and_a_new_key_counts_as_live(client):
    assert client.get("/v1/tenant").json()["auth_required"] is False

    def live() -> int:
        return next(t["live_keys"] for t in client.get("/v1/admin/tenants").json() if t["name"] == "default")

    before = live()
    created = client.post("/v1/admin/keys", json={"name": "count-me", "expires_in_days": 1}).json()
    assert live() == before + 1 and created["expires_at"]
    client.delete(f"/v1/admin/keys/{created['prefix']}")
    assert live() == before


def test_a_job_with_failures_is_found_by_the_failures_filter_its_corrupt_file_not_retryable(
    client, celery_worker
):
    create_collection(client, "ui-tasks-failures")
    files = {"ok.txt": b"fine text", "bad.pdf": CORRUPT_PDF}
    job = wait_job(client, upload(client, "ui-tasks-failures", files)["job_id"])
    assert (job["status"], job["documents_failed"]) == ("succeeded", 1)
    assert job["stages"]["started_at"] >= job["created_at"][:19]
    with_failures = {j["id"] for j in client.get("/v1/jobs", params={"failures": "true"}).json()}
    without = {j["id"] for j in client.get("/v1/jobs", params={"failures": "false"}).json()}
    assert job["id"] in with_failures and job["id"] not in without
    docs = {
        d["source_id"]: d for d in client.get("/v1/collections/ui-tasks-failures/documents").json()["items"]
    }
    assert (docs["bad.pdf"]["retryable"], docs["ok.txt"]["retryable"]) == (False, None)


def test_agent_tools_and_retrieval_defaults_say_what_a_run_or_search_can_use(client):
    tools = client.get("/v1/agents/tools").json()
    by_name = {t["name"]: t for t in tools["builtin"]}
    assert by_name["search"]["default"] and by_name["search"]["parameters"]["required"] == ["query"]
    assert tools["budgets"]["properties"]["max_steps"]["maximum"] == 50
    assert tools["mcp_servers"] == []  # none allowlisted in these settings
    defaults = client.get("/v1/retrieval/defaults").json()
    assert defaults["mode"] in ("bm25", "dense", "hybrid")
    assert defaults["rerankers"] == ["llm"]  # no cross-encoder model configured: it would be skipped


def test_compare_refuses_runs_on_different_datasets(client, session_factory):
    variants = {"base": {"ndcg@10": 0.5, "items": 1}}
    with session_scope(session_factory) as session:
        runs = [
            EvalRun(
                tenant_id=DEFAULT_TENANT_ID,
                kind="retrieval",
                status=JobStatus.succeeded,
                dataset={"path": path, "format": "beir", "split": "test"},
                config={"variants": [{"label": "base", "overrides": {}}]},
                progress={"stage": "done"},
                metrics={"variants": variants},
            )
            for path in ("set-a", "set-b")
        ]
        session.add_all(runs)
        session.flush()
        a, b = (str(r.id) for r in runs)
    refused = client.get(f"/v1/evals/{a}/compare/{b}")
    assert refused.status_code == 409, refused.text
    assert "different datasets" in refused.json()["error"]["message"]
