"""Answer a question from a tenant's collections (grounded, cited, checked), in a conversation or not.

The one use case behind `POST /v1/ask`, `rag/<collection>` chat completions and the MCP `ask` tool:
they validate and meter the request, then stream or collect these events (agents/qa/pipeline.py).
It owns its session and transactions; the caller only reads the events.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator
from sqlalchemy.orm import Session

from agents.qa.pipeline import AskPipeline, AskRequest
from agents.qa.retrieve import retrieve_sources
from agents.qa.store import get_conversation, history, record_turn
from core.errors import ClientError
from core.models import Collection, Conversation, Message
from core.offload import off_loop
from core.tenancy import scope_to_tenant
from retrieval.models import RetrievalModels
from retrieval.service import SearchRequest, request_config
from usecases.lookups import get_collection
from usecases.platform import Platform
from usecases.validation import Seed, check_retrieval_options


class Generation(BaseModel):
    max_tokens: int | None = Field(default=None, ge=1, le=4096)
    temperature: float | None = Field(default=None, ge=0, le=2)
    seed: Seed | None = None


class Question(BaseModel):
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

    @model_validator(mode="after")
    def _one_collection_at_least(self) -> Question:
        if self.collection:
            self.collections = [self.collection, *self.collections]
        if not self.collections:
            raise ValueError("give collection or collections")
        return self


def _search_request(platform: Platform, question: Question) -> SearchRequest:
    if "query" in question.retrieval:
        raise ClientError(422, "invalid_retrieval", "retrieval.query: the question is the query")
    try:
        search = SearchRequest.model_validate({**question.retrieval, "query": question.question})
    except ValueError as exc:
        raise ClientError(422, "invalid_retrieval", f"invalid retrieval overrides: {exc}") from exc
    check_retrieval_options(search.options, platform.settings, "retrieval.options.")
    return search


async def answer(
    platform: Platform,
    tenant: uuid.UUID,
    question: Question,
    history_override: list[dict] | None = None,
    persist: bool = True,
) -> AsyncIterator[dict]:
    """The pipeline's events; the turn is recorded in its conversation at the end unless `persist` is
    off. `history_override` supplies prior turns directly (OpenAI-style requests). Errors the
    caller can fix (unknown collection or conversation, bad overrides) come before any event."""
    search = _search_request(platform, question)
    session = platform.sessions()
    scope_to_tenant(session, tenant)
    try:
        # NOTE: every SQL call below runs in a worker thread (core/offload.py), one at a time on
        # this session, so that an answer's database work never holds up the event loop.
        collections, conversation, turns = await off_loop(_asked, session, tenant, question, history_override)
        configs = [request_config(platform.settings.retrieval, c, search) for c in collections]
        # NOTE: off the loop: the first answer loads the generator (a 1.5B GGUF: two minutes),
        # and every other request of every tenant would wait for it.
        rungs = await off_loop(platform.llm.answer_models, str(tenant))
        backend = rungs[0].backend  # the first (smallest) model also rewrites and transforms queries
        retrieval_llm = platform.llm.retrieval_backend(str(tenant), generator=backend)

        async def retrieve(query: str):
            found = await retrieve_sources(
                session,
                platform.settings,
                collections,
                search.model_copy(update={"query": query}),
                platform.models,
                retrieval_llm,
                configs,
            )
            # NOTE: end the read transaction so that the connection goes back to the pool while the
            # answer is generated (seconds); holding one per streaming answer exhausts the pool.
            await off_loop(session.commit)
            return found

        similarity = embedding_similarity(platform.models, collections[0].embedding_model)
        pipeline = AskPipeline(retrieve, backend, platform.settings.qa, similarity, rungs=rungs)
        request = AskRequest(
            question=question.question,
            history=turns,
            cache_salt=str(tenant),
            answer_mode=question.answer_mode,
            claim_check=question.claim_check,
            rewrite_follow_up=question.rewrite_follow_up,
            sources_token_budget=max((b for c in configs if (b := c.sources_token_budget)), default=None),
            **question.generation.model_dump(),
        )
        query = question.question
        async for event in pipeline.run(request):
            if event["type"] == "sources":
                query = event["query"]
            if event["type"] == "done" and persist:
                ids = [c.id for c in collections]
                conv, message = await off_loop(
                    _record, session, tenant, conversation, ids, question.question, event, query
                )
                event = {**event, "conversation_id": str(conv.id), "message_id": str(message.id)}
            yield event
    finally:
        session.close()


def _asked(
    session: Session, tenant: uuid.UUID, question: Question, history_override: list[dict] | None
) -> tuple[list[Collection], Conversation | None, list[dict]]:
    """The asked collections, the conversation and its earlier turns; 404 for any not the tenant's.
    Commits: the connection goes back to the pool until retrieval needs one."""
    collections = [get_collection(session, tenant, ref) for ref in dict.fromkeys(question.collections)]
    conversation = None
    if question.conversation_id:
        conversation = get_conversation(session, tenant, question.conversation_id)
        if conversation is None:
            raise ClientError(404, "conversation_not_found", f"no conversation {question.conversation_id}")
    turns = history_override or (history(session, conversation) if conversation else [])
    session.commit()
    return collections, conversation, turns


def _record(session: Session, *turn: Any) -> tuple[Conversation, Message]:
    conversation, message = record_turn(session, *turn)
    session.commit()
    return conversation, message


def embedding_similarity(models: RetrievalModels, model_spec: str) -> Callable[[str, list[str]], list[float]]:
    """Cosine similarity under the collection's embedding model (ranks the sentences quote mode offers)."""

    def similarity(query: str, texts: list[str]) -> list[float]:
        vectors = models.embedder(model_spec).encode([query, *texts])
        return (vectors[1:] @ vectors[0]).tolist()

    return similarity
