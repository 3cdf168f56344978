"""Settings of MCP: the server the platform exposes at /mcp, and the MCP servers agents may use."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

NAME = r"^[a-z][a-z0-9_]{0,23}$"  # short: it prefixes each tool's name (OpenAI names are <= 64 chars)


class McpServerConfig(BaseModel):
    """One allowlisted MCP server: a command started over stdio, or a Streamable HTTP URL."""

    name: str = Field(pattern=NAME, description="How runs name it (`mcp_servers`).")
    command: str | None = Field(default=None, description="Executable started with `args` (stdio).")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment of the process.")
    url: str | None = Field(default=None, description="A Streamable HTTP endpoint instead of a command.")
    tools: list[str] | None = Field(
        default=None, description="Only these of its tools are offered (e.g. read-only ones); all if unset."
    )
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description="Arguments fixed for every call of its tools that take them (git's repo_path); "
        "hidden from the model, added to each call.",
    )
    tenants: list[str] | None = Field(
        default=None, description="Tenant ids or names that may use it; every tenant if unset."
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give exactly one of command or url")
        return self


class McpSettings(BaseModel):
    server_enabled: bool = Field(default=True, description="Serve MCP (Streamable HTTP) at /mcp.")
    servers: list[McpServerConfig] = Field(
        default_factory=list,
        description="The MCP servers agent runs may name; JSON in GROUNDWORK_MCP__SERVERS.",
    )
    max_processes: int = Field(
        default=8, ge=1, le=256, description="MCP server connections (processes) held open at once."
    )
    idle_s: float = Field(default=600, gt=0, description="An unused connection is closed after this.")
    connect_timeout_s: float = Field(default=30, gt=0, description="Starting a server and listing its tools.")
    call_timeout_s: float = Field(default=30, gt=0, description="One tool call (also bounded by the run's).")
    max_result_chars: int = Field(default=4000, ge=100, description="A tool result is cut to this.")

    @model_validator(mode="after")
    def _unique_names(self) -> McpSettings:
        names = [s.name for s in self.servers]
        if len(names) != len(set(names)):
            raise ValueError(f"MCP server names must be unique: {names}")
        return self

    def server(self, name: str) -> McpServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)
