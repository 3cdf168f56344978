"""POST /v1/collections/{id}/search."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from api.deps import ReadingTenant, SessionDep, SettingsDep, StateDep
from api.errors import ApiError
from api.llm import local_engine
from api.ratelimit import RateLimit
from api.validation import check_retrieval_options
from retrieval.backends import llm_backends, needs_local_engine
from retrieval.pipeline import ResultChunk
from retrieval.service import SearchRequest, find_collection, request_config, search

router = APIRouter(prefix="/v1", tags=["search"])


class SearchResponse(BaseModel):
    results: list[ResultChunk]
    debug: dict[str, Any] | None = None


@router.post("/collections/{collection_id}/search", response_model=SearchResponse)
async def search_collection(
    collection_id: uuid.UUID,
    body: SearchRequest,
    session: SessionDep,
    settings: SettingsDep,
    tenant: ReadingTenant,
    state: StateDep,
    _: RateLimit,
) -> SearchResponse:
    """Search one collection: BM25, dense or hybrid, optionally transformed and reranked.
    Each result has its text, provenance (document, page, character span) and per-stage scores."""
    check_retrieval_options(body.options, settings)
    collection = find_collection(session, tenant, collection_id)
    if collection is None:
        raise ApiError(404, "collection_not_found", f"no collection {collection_id}")
    # NOTE: the in-process engine is loaded only for a search that needs an LLM.
    config = request_config(settings.retrieval, collection, body)
    engine = local_engine(state) if needs_local_engine(settings, config) else None
    chat, judge = llm_backends(settings, engine, cache_salt=str(tenant))
    result = await search(session, settings.retrieval, collection, body, chat=chat, judge=judge)
    return SearchResponse(results=result.results, debug=result.debug if body.debug else None)
