"""The `agent_runs` rows: what a caller reads about a run, always scoped to its tenant."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from agents.runs.escalation import answered_by
from agents.runs.grounding import claims_of
from core.models import AgentRun

ACTIVE = ("queued", "running")
WAITING = "requires_action"
FINISHED = ("completed", "failed", "cancelled")
# finish_reason -> status
STATUS_OF = {
    "answered": "completed",
    "budget_exhausted": "completed",
    "plan_done": "completed",  # plan_execute: no steps left, no answer written (the last result is kept)
    "cancelled": "cancelled",
    "error": "failed",
}


def get_run(session: Session, tenant_id: uuid.UUID, run_id: uuid.UUID) -> AgentRun | None:
    """The tenant's run, or None (another tenant's run is not found)."""
    return session.scalar(select(AgentRun).where(AgentRun.id == run_id, AgentRun.tenant_id == tenant_id))


def list_runs(
    session: Session, tenant_id: uuid.UUID, limit: int = 20, status: str | None = None
) -> list[AgentRun]:
    query = select(AgentRun).where(AgentRun.tenant_id == tenant_id)
    if status:
        query = query.where(AgentRun.status == status)
    return list(session.scalars(query.order_by(AgentRun.created_at.desc()).limit(limit)))


def finish_run(run: AgentRun, finish_reason: str, values: dict, detail: str | None = None) -> None:
    run.status = STATUS_OF[finish_reason]
    run.finish_reason = finish_reason
    run.detail = detail or values.get("detail")
    run.answer = values.get("answer")
    run.citations = values.get("citations") or []
    run.required_action = {}
    run.finished_at = datetime.now(UTC)


def run_dict(run: AgentRun, trace: bool = True) -> dict:
    out = {
        "id": str(run.id),
        "object": "agent.run",
        "agent": run.agent,
        "status": run.status,
        "input": run.input,
        "collection_ids": run.collection_ids,
        "tools": run.tools,
        "client_tools": [t["function"]["name"] for t in run.client_tools],
        "mcp_servers": run.mcp_servers or [],
        "budgets": run.budgets,
        "review_plan": run.review_plan,
        "plan": run.plan,
        "required_action": run.required_action or None,
        "answer": run.answer,
        "citations": run.citations,
        "usage": run.usage,
        "finish_reason": run.finish_reason,
        "detail": run.detail,
        "active_s": round(run.active_s, 3),
        **answered_by(run.trace),
        "claims": claims_of(run.trace),
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
    if trace:
        out["trace"] = run.trace
    return out
