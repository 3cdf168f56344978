"""Settings of agent runs (see agents/README.md): bounds on what a caller may hand a run, and the
leases of running segments (core/durable.py)."""

from typing import Literal

from pydantic import BaseModel, Field


class AgentSettings(BaseModel):
    tool_call_format: Literal["json", "python"] = Field(
        default="json",
        description="How the in-process engine's model writes an agent's tool calls: 'json', "
        "`<tool_call>` blocks, or 'python', a list of calls with keyword arguments "
        '(`[search(query="...")]`), as in BFCL\'s prompt mode. Python calls made more multi-call BFCL '
        "turns right and more SmolLM2 two-search runs succeed, but SmolLM2 then answered MCP tasks by "
        "copying the worked example's answer instead of calling the tool (agents/README.md, Call "
        "layouts). A remote server is asked through the OpenAI `tools` API either way (our engine "
        "server picks its own layout: `groundwork engine serve --tool-call-format python`).",
    )
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
    stale_after_s: float = Field(
        default=60.0,
        gt=0,
        description="A running segment beats every third of this; one silent this long lost its process "
        "(killed, host gone) and the run is resumed from its last checkpoint by another API process.",
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        description="Segments in a row a run may start without one ending (its process died each time, "
        "say: a run that kills it); the next claim fails the run instead, saying why.",
    )
    recovery_interval_s: float = Field(
        default=20.0,
        gt=0,
        description="How often each API process looks for runs to resume (also once at start-up).",
    )
