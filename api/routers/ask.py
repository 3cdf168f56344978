"""POST /v1/ask: grounded answers with citations, streamed or whole, in conversations."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field, model_validator
from sqlalchemy.orm import Session
from sse_starlette import ServerSentEvent

from agents.qa.pipeline import AskPipeline, AskRequest
from agents.qa.retrieve import retrieve_sources
from agents.qa.store import get_conversation, history, record_turn
from api.admission import admitted
from api.charging import charging, estimate_tokens, reserve
from api.deps import ReadingTenant, StateDep
from api.disconnect import unless_disconnected
from api.errors import ApiError
from api.lookups import get_collection
from api.metrics import admit_early, observed_route, record_ask
from api.ratelimit import RateLimit
from api.schemas.ask import AskOut
from api.schemas.common import event_stream
from api.state import AppState
from api.streaming import event_source, sse
from api.validation import Seed, check_retrieval_options
from core.tenancy import scope_to_tenant
from retrieval.embedding import get_embedder
from retrieval.service import SearchRequest, request_config

router = APIRouter(prefix="/v1", tags=["ask"])


class Generation(BaseModel):
    max_tokens: int | None = Field(default=None, ge=1, le=4096)
    temperature: float | None = Field(default=None, ge=0, le=2)
    seed: Seed | None = None


class AskBody(BaseModel):
    question: str = Field(min_length=1, max_length=8000)
    collection: str | None = Field(default=None, description="A collection's id or name.")
    collections: list[str] = Field(default_factory=list, description="Several collections (ids or names).")
    conversation_id: uuid.UUID | None = None
    retrieval: dict[str, Any] = Field(
        default_factory=dict,
        description="Search overrides: mode, top_k, rerank, transform, filters, options.",
    )
    generation: Generation = Field(default_factory=Generation)
    answer_mode: Literal["quote", "generate", "auto"] | None = Field(
        default=None,
        description="quote: only verbatim source sentences, chosen under a grammar; generate: written by "
        "the model, each sentence checked; auto: quote for small generators. Default: the server's setting.",
    )
    claim_check: bool | None = Field(
        default=None, description="Check each generated sentence against its sources (default: on)."
    )
    rewrite_follow_up: bool | None = Field(
        default=None,
        description="Rewrite a follow-up into a standalone search query (the `sources` event shows it); "
        "default: the server's setting.",
    )
    stream: bool = False

    @model_validator(mode="after")
    def _one_collection_at_least(self) -> AskBody:
        if self.collection:
            self.collections = [self.collection, *self.collections]
        if not self.collections:
            raise ValueError("give collection or collections")
        return self


async def run_ask(
    state: AppState,
    session: Session,
    tenant: uuid.UUID,
    body: AskBody,
    history_override: list[dict] | None = None,
    persist: bool = True,
) -> AsyncIterator[dict]:
    """The pipeline's events, persisted at the end (unless `persist` is off); the caller streams or
    collects them. `history_override` supplies prior turns directly (OpenAI-style requests)."""
    collections = [get_collection(session, tenant, ref) for ref in dict.fromkeys(body.collections)]
    conversation = None
    if body.conversation_id:
        conversation = get_conversation(session, tenant, body.conversation_id)
        if conversation is None:
            raise ApiError(404, "conversation_not_found", f"no conversation {body.conversation_id}")
    session.commit()  # release the connection until retrieval needs one (see retrieve below)
    if "query" in body.retrieval:
        raise ApiError(422, "invalid_retrieval", "retrieval.query: the question is the query")
    try:
        search = SearchRequest.model_validate({**body.retrieval, "query": body.question})
    except ValueError as exc:
        raise ApiError(422, "invalid_retrieval", f"invalid retrieval overrides: {exc}") from exc
    check_retrieval_options(search.options, state.settings, "retrieval.options.")
    rungs = state.llm.answer_models(cache_salt=str(tenant))
    backend = rungs[0].backend  # the first (smallest) model also rewrites and transforms queries

    async def retrieve(query: str):
        found = await retrieve_sources(
            session, state.settings, collections, search.model_copy(update={"query": query}), backend
        )
        # NOTE: end the read transaction so that the connection goes back to the pool while the
        # answer is generated (seconds); holding one per streaming answer exhausts the pool.
        session.commit()
        return found

    similarity = embedding_similarity(collections[0].embedding_model)
    pipeline = AskPipeline(retrieve, backend, state.settings.qa, similarity, rungs=rungs)
    request = AskRequest(
        question=body.question,
        history=history_override or (history(session, conversation) if conversation else []),
        cache_salt=str(tenant),
        answer_mode=body.answer_mode,
        claim_check=body.claim_check,
        rewrite_follow_up=body.rewrite_follow_up,
        sources_token_budget=max(
            (
                b
                for c in collections
                if (b := request_config(state.settings.retrieval, c, search).sources_token_budget)
            ),
            default=None,
        ),
        **body.generation.model_dump(),
    )
    query = body.question
    async for event in pipeline.run(request):
        if event["type"] == "sources":
            query = event["query"]
        if event["type"] == "done":
            record_ask(state, event["usage"], event["timings"], event["escalations"])
            if persist:
                conv, message = record_turn(
                    session, tenant, conversation, [c.id for c in collections], body.question, event, query
                )
                session.commit()
                event = {**event, "conversation_id": str(conv.id), "message_id": str(message.id)}
        yield event


def embedding_similarity(model_spec: str):
    """Cosine similarity under the collection's embedding model (ranks the sentences quote mode offers)."""

    def similarity(query: str, texts: list[str]) -> list[float]:
        embedder = get_embedder(model_spec)
        vectors = embedder.encode([query, *texts])
        return (vectors[1:] @ vectors[0]).tolist()

    return similarity


@router.post(
    "/ask",
    response_model=AskOut,
    responses=event_stream(
        "With `stream`: `event: sources`, then `event: token` per piece of text, then `event: done` "
        "(this response's fields), each with its JSON as data; a failure midway ends with `event: error`."
    ),
)
async def ask(request: Request, body: AskBody, tenant: ReadingTenant, state: StateDep, meter: RateLimit):
    """Answer a question from the collections' documents, citing the chunks it used."""
    # NOTE: the session lives as long as the event stream, which outlasts this handler when streaming.
    qa = state.settings.qa
    slots = state.answer_slots
    admit_early(state, slots, "ask", tenant)
    held = await asyncio.to_thread(
        reserve,
        meter,
        estimate_tokens(body.question) + qa.sources_token_budget,
        body.generation.max_tokens or qa.max_tokens,
    )
    session = state.sessions()
    scope_to_tenant(session, tenant)
    events = charging(admitted(run_ask(state, session, tenant, body), slots, str(tenant)), held)
    events = observed_route(events, state, "ask", tenant)
    try:
        first = await anext(events)  # errors (unknown collection, bad overrides) surface as 4xx here
    except BaseException:
        session.close()
        raise
    if body.stream:

        async def stream() -> AsyncIterator[ServerSentEvent]:
            try:
                yield sse(first["type"], first)
                async for event in events:
                    yield sse(event["type"], event)
            finally:
                session.close()

        return event_source(stream())

    async def answer() -> dict:
        try:
            return [event async for event in events if event["type"] == "done"][-1]
        finally:
            await events.aclose()  # cancelled (client gone): the engine request is aborted now

    try:
        done = await unless_disconnected(request, answer())
    finally:
        session.close()
    return {
        **{k: v for k, v in done.items() if k != "type"},
        "query": first["query"],
        "sources": first["sources"],
        "context": first.get("context"),
    }
