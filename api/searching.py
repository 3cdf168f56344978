"""One collection's search as REST (`POST /v1/collections/{id}/search`) and MCP (`search`) run it."""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from api.errors import ApiError
from api.state import AppState
from retrieval.backends import llm_backends, needs_local_engine
from retrieval.pipeline import SearchResult
from retrieval.service import SearchRequest, find_collection, request_config, search
from usecases.validation import check_retrieval_options


async def search_in_tenant(
    state: AppState, session: Session, tenant: uuid.UUID, collection_id: uuid.UUID, body: SearchRequest
) -> SearchResult:
    """The search; 404 for a collection outside the tenant, 422 for options the server refuses."""
    settings = state.settings
    check_retrieval_options(body.options, settings)
    collection = find_collection(session, tenant, collection_id)
    if collection is None:
        raise ApiError(404, "collection_not_found", f"no collection {collection_id}")
    # NOTE: the in-process engine is loaded only for a search that needs an LLM.
    config = request_config(settings.retrieval, collection, body)
    engine = state.llm.local_engine() if needs_local_engine(settings, config) else None
    chat, judge = llm_backends(settings, engine, cache_salt=str(tenant))
    return await search(session, settings.retrieval, collection, body, chat=chat, judge=judge)
