"""What a tool is: a plain async function with typed, bounded arguments; its schema comes from them.

A tool gets a `ToolContext` (the run's tenant, collections, database and the sources it has seen)
and returns a `ToolResult`: the observation text the model reads, plus data for the trace.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from pydantic import BaseModel, ValidationError, create_model
from sqlalchemy.orm import Session, sessionmaker

from core.settings import Settings
from core.tenancy import scope_to_tenant
from inference.client import ChatBackend
from retrieval.models import RetrievalModels


@dataclass
class ToolContext:
    sessions: sessionmaker[Session]
    settings: Settings
    tenant_id: uuid.UUID
    collection_ids: list[uuid.UUID]  # what search may read; all the tenant's when the run named none
    backend: ChatBackend | None = None
    # What retrieval's query transforms and LLM reranker call, salted for the tenant (None: skipped).
    retrieval_llm: ChatBackend | None = None
    models: RetrievalModels | None = None  # the process's embedders (the search tools need them)
    # chunk id -> source dict with its citation `number`, for the whole run (numbers never change).
    sources: dict[str, dict] = field(default_factory=dict)

    def session(self) -> Session:
        """A session of the run's tenant: with the platform's tenant scoping installed, row-level
        security hides every other tenant's rows from the tools' queries, filters or not."""
        session = self.sessions()
        scope_to_tenant(session, self.tenant_id)
        return session

    def cite(self, source: dict) -> int:
        """The run-wide number of a source, numbering it on first sight."""
        known = self.sources.get(source["chunk_id"])
        if known is None:
            known = {**source, "number": len(self.sources) + 1}
            self.sources[source["chunk_id"]] = known
        return known["number"]


@dataclass
class ToolResult:
    text: str  # what the model reads
    data: Any = None  # structured, for the trace and the API


ToolFn = Callable[..., Awaitable[ToolResult]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    fn: ToolFn
    args: type[BaseModel]

    @classmethod
    def from_function(cls, fn: ToolFn) -> Tool:
        """Name and description from the function, argument schema from its annotated parameters
        after the leading `ctx` (use `Annotated[str, Field(max_length=...)]` to bound them)."""
        hints = get_type_hints(fn, include_extras=True)
        params = list(inspect.signature(fn).parameters.values())[1:]
        fields = {
            p.name: (hints[p.name], ... if p.default is inspect.Parameter.empty else p.default)
            for p in params
        }
        model = create_model(f"{fn.__name__}_args", **fields)
        return cls(fn.__name__, inspect.cleandoc(fn.__doc__ or "").split("\n\n")[0], fn, model)

    def schema(self) -> dict:
        return _strip_titles(self.args.model_json_schema())

    def openai(self) -> dict:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.schema()},
        }

    async def run(self, ctx: ToolContext, arguments: dict) -> ToolResult:
        try:
            args = self.args.model_validate(arguments)
        except ValidationError as exc:
            raise ValueError(f"invalid arguments: {exc.errors(include_url=False)}") from exc
        return await self.fn(ctx, **args.model_dump())


def _strip_titles(schema: Any) -> Any:
    """Pydantic's `title`s only lengthen the prompt a small model reads."""
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema
