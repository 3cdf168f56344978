"""Search one of a tenant's collections: BM25, dense or hybrid, optionally transformed and reranked.

The use case behind `POST /v1/collections/{id}/search`, the MCP `search` tool and `groundwork search`.
It owns its session; an LLM is used (and the in-process engine loaded) only when the search's
config needs one (a query transform or the LLM reranker): the provider's `retrieval_backend`.
"""

from __future__ import annotations

import uuid

from core.models import Collection
from core.offload import off_loop
from core.tenancy import scope_to_tenant
from retrieval.pipeline import SearchResult
from retrieval.service import SearchRequest, request_config, search
from usecases.lookups import get_collection
from usecases.platform import Platform
from usecases.validation import check_retrieval_options


async def search_in_collection(
    platform: Platform, tenant: uuid.UUID, collection_ref: str, request: SearchRequest
) -> tuple[Collection, SearchResult]:
    """The collection (by id or name) and its results; 404 for a collection outside the tenant, 422
    for options the server refuses."""
    settings = platform.settings
    check_retrieval_options(request.options, settings)
    with platform.sessions() as session:
        scope_to_tenant(session, tenant)
        # NOTE: SQL off the event loop, here and in the search itself (retrieval/pipeline.py).
        collection = await off_loop(get_collection, session, tenant, collection_ref)
        config = request_config(settings.retrieval, collection, request)
        # A search that needs the LLM may be what loads the generator: off the loop too.
        llm = await off_loop(platform.llm.retrieval_backend, str(tenant)) if config.needs_llm else None
        result = await search(
            session, settings.retrieval, collection, request, platform.models, llm=llm, config=config
        )
    return collection, result
