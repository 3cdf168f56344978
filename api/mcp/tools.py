"""The MCP tools: exact argument models (bounds stated, unknown keys refused) and what each runs.

Each tool calls what its REST route calls (the same scope check, rate limit, tenant-scoped
lookups and use case), so MCP and REST cannot drift apart; errors are the same `ClientError`s, which
server.py turns into MCP tool errors.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select

from agents.tools import BUILTIN
from api.admission import admitted
from api.agent_runner import agent_gate
from api.charging import admit_reserving, answer_worst_case, charging
from api.deps import Principal, require_scope
from api.document_text import parsed_text
from api.metrics import recorded_answers
from api.ratelimit import Meter, limit_request
from api.scoping import get_in_tenant
from api.state import AppState
from core.errors import ClientError
from core.models import Collection, Document
from core.settings.retrieval import SearchMode
from core.tenancy import scope_to_tenant
from retrieval.filters import SearchFilters
from retrieval.service import SearchRequest
from usecases import agent_segments as segments
from usecases.agent_runs import RunRequest, ToolOutput, read_run
from usecases.answer import Generation, Question, answer
from usecases.search import search_in_collection

READ_MAX_CHARS = 20_000


@dataclass
class Caller:
    """Who calls a tool and through what: the app's state, the key's principal, and the request
    the rate limiter reports its headers on (a stand-in over stdio)."""

    state: AppState
    principal: Principal
    request: Any

    def tenant(self, scope: str) -> uuid.UUID:
        require_scope(self.principal, scope)
        return self.principal.tenant_id

    def meter(self) -> Meter:
        return limit_request(self.request, self.principal, self.state)


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


CollectionRef = Annotated[str, Field(min_length=1, max_length=200, description="A collection's id or name.")]
Collections = Annotated[list[CollectionRef], Field(min_length=1, max_length=5)]


class SearchArgs(Args):
    collections: Collections
    query: str = Field(min_length=1, max_length=2000)
    mode: SearchMode | None = Field(
        default=None, description="bm25, dense or hybrid (the collection's default)."
    )
    k: int = Field(default=10, ge=1, le=50, description="Results per page.")
    offset: int = Field(
        default=0, ge=0, le=950, description="Results to skip: the previous page's next_offset."
    )
    filters: SearchFilters | None = None
    rerank: bool | None = None


class AskArgs(Args):
    question: str = Field(min_length=1, max_length=4000)
    collections: Collections
    answer_mode: Literal["quote", "generate", "auto"] | None = None
    claim_check: bool | None = Field(default=None, description="Check each sentence against its sources.")
    max_tokens: int | None = Field(default=None, ge=1, le=1024)


class ListArgs(Args):
    limit: int = Field(default=50, ge=1, le=100)
    offset: int = Field(default=0, ge=0, le=1_000_000)


class ReadArgs(Args):
    document_id: uuid.UUID
    start: int = Field(default=0, ge=0, le=1_000_000_000, description="First character of the span.")
    length: int = Field(default=4000, ge=1, le=READ_MAX_CHARS, description="Characters to read.")


class StartRunArgs(Args):
    input: str = Field(min_length=1, max_length=4000, description="The task.")
    agent: Literal["react", "rewoo", "plan_execute"] = "react"
    collections: list[CollectionRef] = Field(default_factory=list, max_length=10, description="All if empty.")
    tools: list[Literal[tuple(BUILTIN)]] = Field(  # type: ignore[valid-type]
        default_factory=list, max_length=len(BUILTIN), description="Built-in tools; the defaults if empty."
    )
    client_tools: list[dict[str, Any]] = Field(
        default_factory=list,
        max_length=8,
        description="OpenAI function tools the caller runs (answered with submit_tool_outputs).",
    )
    mcp_servers: list[Annotated[str, Field(min_length=1, max_length=24)]] = Field(
        default_factory=list, max_length=8
    )
    wait: bool = Field(default=False, description="Return at the run's first stop instead of at once.")


class GetRunArgs(Args):
    run_id: uuid.UUID
    trace: bool = Field(default=False, description="Include every step of the run.")


class ToolOutputArg(ToolOutput):
    # REST's ToolOutput with unknown keys refused, as in every MCP argument (exact schemas). NOTE: a
    # comment, not a docstring: pydantic would send a docstring to clients as the description.
    model_config = ConfigDict(extra="forbid")


class ToolOutputsArgs(Args):
    run_id: uuid.UUID
    tool_outputs: list[ToolOutputArg] = Field(min_length=1, max_length=16)
    wait: bool = Field(default=True, description="Return at the run's next stop instead of at once.")


def _session(caller: Caller, tenant: uuid.UUID):
    session = caller.state.sessions()
    scope_to_tenant(session, tenant)
    return session


async def search(caller: Caller, args: SearchArgs) -> dict:
    """Search collections (BM25, dense or hybrid); paged results with ids, titles, spans and scores."""
    tenant = caller.tenant("read")
    await asyncio.to_thread(caller.meter)
    hits = []
    body = SearchRequest(
        query=args.query,
        top_k=args.offset + args.k + 1,  # one more than the page: is there a next one?
        mode=args.mode,
        filters=args.filters or SearchFilters(),
        rerank=args.rerank,
    )
    for ref in dict.fromkeys(args.collections):
        collection, found = await search_in_collection(caller.state, tenant, ref, body)
        hits += [(collection, r) for r in found.results]
    if len(args.collections) > 1:
        hits.sort(key=lambda h: -h[1].score)
    page = hits[args.offset : args.offset + args.k]
    results = [
        {
            "chunk_id": str(r.chunk_id),
            "document_id": str(r.document_id),
            "collection": c.name,
            "source_id": r.source_id,
            "title": r.title,
            "page": r.page,
            "char_start": r.char_start,
            "char_end": r.char_end,
            "score": r.score,
            "text": r.text,
        }
        for c, r in page
    ]
    more = len(hits) > args.offset + args.k
    return {"results": results, "next_offset": args.offset + args.k if more else None}


async def ask(caller: Caller, args: AskArgs) -> dict:
    """Answer a question from the collections, with citations and the claim check of each sentence."""
    tenant = caller.tenant("read")
    question = Question(
        question=args.question,
        collections=args.collections,
        answer_mode=args.answer_mode,
        claim_check=args.claim_check,
        generation=Generation(max_tokens=args.max_tokens),
    )
    worst = answer_worst_case(caller.state.settings.qa, args.question, args.max_tokens)
    held = await asyncio.to_thread(admit_reserving, caller.request, caller.principal, caller.state, *worst)
    events = recorded_answers(answer(caller.state, tenant, question, persist=False), caller.state)
    done = [
        e
        async for e in charging(admitted(events, caller.state.answer_slots, str(tenant)), held)
        if e["type"] == "done"
    ]
    keep = (
        "answer",
        "citations",
        "invalid_citations",
        "claims",
        "grounded",
        "finish_reason",
        "answer_mode_used",
        "model",
        "escalations",
    )
    return {k: done[-1].get(k) for k in (*keep, "usage")}


async def list_collections(caller: Caller, args: ListArgs) -> dict:
    """The tenant's collections by name, paged, with their document counts."""
    tenant = caller.tenant("read")
    with _session(caller, tenant) as session:
        total = session.scalar(select(func.count()).where(Collection.tenant_id == tenant))
        docs = select(func.count()).where(Document.collection_id == Collection.id).scalar_subquery()
        rows = session.execute(
            select(Collection, docs)
            .where(Collection.tenant_id == tenant)
            .order_by(Collection.name)
            .limit(args.limit)
            .offset(args.offset)
        ).all()
    items = [{"id": str(c.id), "name": c.name, "description": c.description, "documents": n} for c, n in rows]
    more = args.offset + len(items) < total
    return {"collections": items, "total": total, "next_offset": args.offset + len(items) if more else None}


async def read_document(caller: Caller, args: ReadArgs) -> dict:
    """Read a span of a document's parsed text (at most 20,000 characters a call)."""
    tenant = caller.tenant("read")
    with _session(caller, tenant) as session:
        doc = get_in_tenant(session, tenant, Document, args.document_id, "document", "document_not_found")
        text = parsed_text(session, doc.id).text
        ids = {"document_id": str(doc.id), "collection_id": str(doc.collection_id)}
        about = {**ids, "source_id": doc.source_id, "title": doc.title}
    end = min(len(text), args.start + args.length)
    start = min(args.start, end)
    span = {"start": start, "end": end, "total_chars": len(text), "text": text[start:end]}
    return {**about, **span, "next_start": end if end < len(text) else None}


async def start_agent_run(caller: Caller, args: StartRunArgs) -> dict:
    """Start an agent run over the collections; returns it at once (poll get_agent_run) or with wait."""
    tenant = caller.tenant("write")
    meter = await asyncio.to_thread(caller.meter)
    try:
        request = RunRequest(
            agent=args.agent,
            input=args.input,
            collections=args.collections,
            tools=[*args.tools, *args.client_tools],
            mcp_servers=args.mcp_servers,
        )
    except ValueError as exc:
        raise ClientError(422, "invalid_run", str(exc)) from None
    gate, mode = agent_gate(caller.state, meter, tenant), _mode(args.wait)
    return await segments.start_run(caller.state, caller.state.agent_runner, tenant, request, gate, mode)


async def get_agent_run(caller: Caller, args: GetRunArgs) -> dict:
    """An agent run: status, answer, citations, pending client tool calls, and its trace if asked."""
    return read_run(caller.state, caller.tenant("read"), args.run_id, trace=args.trace)


async def submit_tool_outputs(caller: Caller, args: ToolOutputsArgs) -> dict:
    """Give the outputs of the client tool calls a run waits for; the run resumes."""
    tenant = caller.tenant("write")
    meter = await asyncio.to_thread(caller.meter)
    gate, mode = agent_gate(caller.state, meter, tenant), _mode(args.wait)
    runner = caller.state.agent_runner
    return await segments.submit_tool_outputs(
        caller.state, runner, tenant, args.run_id, args.tool_outputs, gate, mode
    )


def _mode(wait: bool) -> segments.Mode:
    """A tool returns the run at its next stop with `wait`, else at once (poll get_agent_run)."""
    return "wait" if wait else "background"


@dataclass(frozen=True)
class McpTool:
    args: type[Args]
    run: Callable[[Caller, Any], Awaitable[dict]]
    read_only: bool

    @property
    def name(self) -> str:
        return self.run.__name__

    @property
    def description(self) -> str:
        return (self.run.__doc__ or "").strip()


TOOLS: dict[str, McpTool] = {
    t.name: t
    for t in (
        McpTool(SearchArgs, search, True),
        McpTool(AskArgs, ask, True),
        McpTool(ListArgs, list_collections, True),
        McpTool(ReadArgs, read_document, True),
        McpTool(StartRunArgs, start_agent_run, False),
        McpTool(GetRunArgs, get_agent_run, True),
        McpTool(ToolOutputsArgs, submit_tool_outputs, False),
    )
}
