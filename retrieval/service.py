"""Search as the API and the CLI offer it: a request, scoped to a tenant's collection."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from core.models import Collection
from core.settings.retrieval import RetrievalConfig, RetrievalSettings, SearchMode
from core.tracing import traced
from inference.client import ChatBackend
from retrieval.config import resolve_config
from retrieval.filters import SearchFilters
from retrieval.models import RetrievalModels
from retrieval.pipeline import SearchPipeline, SearchResult


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt key is an error, not a no-op

    query: str = Field(min_length=1, max_length=10_000, description="What to search for.")
    top_k: int | None = Field(default=None, ge=1, le=1000, description="Results to return.")
    mode: SearchMode | None = Field(default=None, description="bm25, dense or hybrid.")
    filters: SearchFilters = Field(default_factory=SearchFilters)
    rerank: bool | None = Field(default=None, description="Turn the collection's reranker on or off.")
    transform: Literal["none", "hyde", "multi_query"] | None = Field(
        default=None, description="Query transformation."
    )
    debug: bool = Field(default=False, description="Add each stage's ranking, the config and timings.")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Any other pipeline options, partial RetrievalConfig shape (e.g. {'bm25': {'k1': 1.2}}).",
    )

    def overrides(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.options)
        if self.top_k is not None:
            out["top_k"] = self.top_k
        if self.mode is not None:
            out["mode"] = self.mode
        if self.rerank is not None:
            out["rerank"] = {**out.get("rerank", {}), "enabled": self.rerank}
        if self.transform is not None:
            out["transform"] = {**out.get("transform", {}), "kind": self.transform}
        return out


def find_collection(session: Session, tenant_id: uuid.UUID, collection_id: uuid.UUID) -> Collection | None:
    """The collection if it belongs to the tenant; another tenant's collection is not found."""
    return session.scalar(
        select(Collection).where(Collection.id == collection_id, Collection.tenant_id == tenant_id)
    )


def request_config(
    defaults: RetrievalSettings, collection: Collection, request: SearchRequest
) -> RetrievalConfig:
    return resolve_config(defaults, collection.retrieval, request.overrides())


@traced("retrieval.search")
async def search(
    session: Session,
    defaults: RetrievalSettings,
    collection: Collection,
    request: SearchRequest,
    models: RetrievalModels,
    *,
    llm: ChatBackend | None = None,
    config: RetrievalConfig | None = None,
) -> SearchResult:
    """`models`: the process's (RetrievalModels); `config`: the caller's `request_config` for this
    collection and request, when it resolved it."""
    config = config or request_config(defaults, collection, request)
    pipeline = SearchPipeline(config, models, llm=llm)
    return await pipeline.run(session, collection, request.query, request.filters, debug=request.debug)
