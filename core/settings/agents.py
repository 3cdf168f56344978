"""Settings of agent runs (see agents/README.md): bounds on what a caller may hand a run."""

from pydantic import BaseModel, Field


class AgentSettings(BaseModel):
    max_plan_steps: int = Field(
        default=20, ge=1, description="Most steps of a plan a caller gives when reviewing a run (else 422)."
    )
    max_client_tool_chars: int = Field(
        default=16_000,
        ge=100,
        description="Most characters of one client tool's JSON definition. Its schema is written into "
        "every prompt and compiled into the call grammar: one larger than a small model's context "
        "(a 50,000-value enum) cannot work, so the run is refused (422) instead of failing later.",
    )
