"""/v1/agents/runs shapes (agents/runs/store.py `run_dict`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class AgentRunSummary(BaseModel):
    """A run without its trace (lists, and a run started in the background)."""

    model_config = ConfigDict(extra="allow")

    id: str
    object: Literal["agent.run"]
    agent: str
    status: str
    input: str
    collection_ids: list[str]
    tools: list[str]
    client_tools: list[str]
    mcp_servers: list[str]
    budgets: dict[str, Any]
    review_plan: bool
    plan: list[Any] | None
    required_action: dict[str, Any] | None
    answer: str | None
    citations: list[Any] | None
    usage: dict[str, Any] | None
    finish_reason: str | None
    detail: str | None
    active_s: float
    model: str | None = Field(default=None, description="The model of the run's last LLM turn.")
    escalations: list[dict[str, Any]] = Field(
        default_factory=list,
        description="qa.cascade: `{from, reason, node}` per turn a model got wrong (a missing or invalid "
        "tool call) and the next model made instead; node null: a whole try that ended without an "
        "answer (reason `no_answer:<finish_reason>`), run again by the next model.",
    )
    claims: list[dict[str, Any]] | None = Field(
        default=None,
        description="The claim check of the answer (agents/runs/grounding.py): per sentence `supported` "
        "true, false or null (unknown), its `evidence` in the run's sources; null: no answer checked.",
    )
    created_at: str | None
    finished_at: str | None


class AgentRunOut(AgentRunSummary):
    trace: list[Any]


class AgentRunList(BaseModel):
    object: Literal["list"]
    data: list[AgentRunSummary]
