"""The API's runner of agent runs (usecases/agent_segments.py runs their segments on it) and how a
run's LLM calls are charged: to the caller's meter and its tenant's answer slots."""

from __future__ import annotations

import uuid

from agents.runs.runner import AgentRunner
from api.charging import AgentTokenGate
from api.deps import Principal
from api.metrics import record_escalations
from api.ratelimit import Meter, meter_of
from api.state import AppState
from core.models import AgentRun


def agent_gate(state: AppState, meter: Meter, tenant: uuid.UUID) -> AgentTokenGate:
    """How a run's LLM calls are admitted: tokens on `meter`, answer slots of `tenant`."""
    return AgentTokenGate(meter, state.answer_slots, str(tenant))


def resumed_principal(run: AgentRun) -> Principal:
    """Who pays for a run resumed after a restart: its tenant, no key."""
    return Principal(run.tenant_id, None, frozenset())


def build_runner(state: AppState) -> AgentRunner:
    """The process's runner of agent runs (api.main.build_state); what it calls reads the state."""
    return AgentRunner(
        state.sessions,
        state.settings,
        state.database.url,
        lambda: state.llm.answer_models(),
        state.mcp_pool,
        lambda run: agent_gate(state, meter_of(state, resumed_principal(run)), run.tenant_id),
        lambda steps: record_escalations(state, "agent", steps),
        lambda tenant, model: state.llm.retrieval_backend(str(tenant), generator=model),
        state.models,
        pace=state.llm.foreground.yield_to_holds,
    )
