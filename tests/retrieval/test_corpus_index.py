"""Collections made by `retrieval.corpus` (eval runs, benchmarks) do not lock the shared chunks
table: the collection's transaction takes no index lock, and its HNSW index is built CONCURRENTLY
after the commit, while other collections keep writing."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from sqlalchemy import text

from retrieval.corpus import CorpusDoc, add_documents, build_prefix_index, create_collection
from retrieval.embedding import prefix_index_name

pytestmark = pytest.mark.integration

TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")


def _collection(session, name: str):
    return create_collection(session, TENANT, f"{name}-{uuid.uuid4().hex[:8]}", "m", 8, 8)


def test_creating_a_collection_leaves_other_writers_unblocked(session_factory, db_engine):
    with session_factory() as other:
        writer = _collection(other, "writer")
        other.commit()
        with session_factory() as session:
            created = _collection(session, "eval")  # the transaction stays open meanwhile
            other.execute(text("SET LOCAL lock_timeout = '2s'"))
            add_documents(other, writer, [CorpusDoc("d", "text")], np.eye(1, 8, dtype=np.float32))
            other.commit()  # a plain CREATE INDEX in `session` made this wait (lock_timeout: error)
            session.commit()
    build_prefix_index(db_engine, created.id, created.index_dim)
    with db_engine.connect() as conn:
        valid = conn.execute(
            text(
                "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE c.relname = :n"
            ),
            {"n": prefix_index_name(created.id)},
        ).scalar_one()
    assert valid is True
