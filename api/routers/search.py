"""POST /v1/collections/{id}/search."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from api.deps import ReadingTenant, StateDep
from api.ratelimit import RateLimit
from retrieval.pipeline import ResultChunk
from retrieval.service import SearchRequest
from usecases.search import search_in_collection

router = APIRouter(prefix="/v1", tags=["search"])


class SearchResponse(BaseModel):
    results: list[ResultChunk]
    debug: dict[str, Any] | None = None


@router.post("/collections/{collection_id}/search", response_model=SearchResponse)
async def search_collection(
    collection_id: uuid.UUID,
    body: SearchRequest,
    tenant: ReadingTenant,
    state: StateDep,
    _: RateLimit,
) -> SearchResponse:
    """Search one collection: BM25, dense or hybrid, optionally transformed and reranked.
    Each result has its text, provenance (document, page, character span) and per-stage scores."""
    _, result = await search_in_collection(state, tenant, str(collection_id), body)
    return SearchResponse(results=result.results, debug=result.debug if body.debug else None)
