"""Writing a corpus straight into a collection, one chunk per document, for evaluation,
benchmarks and tests (the ingestion pipeline is the way for real files).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import Engine, insert, text
from sqlalchemy.orm import Session

from core.models import Chunk, Collection, Document, DocumentStatus
from retrieval.embedding import matryoshka_prefix, prefix_index_ddl, prefix_index_name


@dataclass
class CorpusDoc:
    source_id: str
    text: str
    title: str = ""
    metadata: dict = field(default_factory=dict)


def create_collection(
    session: Session,
    tenant_id: uuid.UUID,
    name: str,
    embedding_model: str,
    embedding_dim: int,
    index_dim: int,
    retrieval: dict | None = None,
    chunking: dict | None = None,
    description: str = "",
) -> Collection:
    """A collection, inserted in the caller's transaction; after the commit, the caller builds its
    partial HNSW prefix index with `build_prefix_index` (searches run exact until then)."""
    collection = Collection(
        tenant_id=tenant_id,
        name=name,
        description=description,
        embedding_model=embedding_model,
        embedding_dim=embedding_dim,
        index_dim=index_dim,
        chunking=chunking or {},
        retrieval=retrieval or {},
    )
    session.add(collection)
    session.flush()
    return collection


# NOTE: index DDL on the shared `chunks` table runs CONCURRENTLY, outside any transaction, on the
# owner's connection: a plain CREATE/DROP INDEX takes a lock that stalls every tenant's writes (and
# DROP every tenant's searches) for its duration. Only this collection's searches run exact meanwhile.


def build_prefix_index(engine: Engine, collection_id: uuid.UUID, index_dim: int) -> None:
    """CREATE INDEX CONCURRENTLY outside any transaction; a failed build leaves no invalid index."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        try:
            conn.execute(text(prefix_index_ddl(collection_id, index_dim, concurrently=True)))
        except Exception:
            conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {prefix_index_name(collection_id)}"))
            raise


def drop_prefix_index(engine: Engine, collection_id: uuid.UUID) -> None:
    """DROP INDEX CONCURRENTLY outside any transaction."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {prefix_index_name(collection_id)}"))


def _sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def add_documents(
    session: Session, collection: Collection, docs: Sequence[CorpusDoc], vectors: np.ndarray
) -> list[uuid.UUID]:
    """Insert documents with one chunk each (text = title + text); returns the chunk ids.
    `vectors` are the chunks' normalised full embeddings, in order."""
    doc_rows, chunk_rows = [], []
    prefixes = matryoshka_prefix(vectors, collection.index_dim)
    for doc, vector, prefix in zip(docs, vectors, prefixes, strict=True):
        body = f"{doc.title}\n{doc.text}" if doc.title else doc.text
        doc_id, chunk_id = uuid.uuid4(), uuid.uuid4()
        doc_rows.append(
            {
                "id": doc_id,
                "collection_id": collection.id,
                "source_id": doc.source_id,
                "title": doc.title,
                "size_bytes": len(body.encode()),
                "content_hash": _sha(body),
                "status": DocumentStatus.indexed,
                "version": 1,
                "metadata_": doc.metadata,
            }
        )
        chunk_rows.append(
            {
                "id": chunk_id,
                "document_id": doc_id,
                "collection_id": collection.id,
                "ordinal": 0,
                "text": body,
                "text_hash": _sha(body),
                "token_count": len(body.split()),
                "char_start": 0,
                "char_end": len(body),
                "heading_path": [],
                "metadata_": {},
                "embedding": vector,
                "embedding_prefix": prefix,
            }
        )
    if doc_rows:
        session.execute(insert(Document), doc_rows)
        session.execute(insert(Chunk), chunk_rows)
    return [row["id"] for row in chunk_rows]
