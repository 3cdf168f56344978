"""Writing a corpus straight into a collection, one chunk per document, for evaluation,
benchmarks and tests (the ingestion pipeline is the way for real files).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import insert, text
from sqlalchemy.orm import Session

from core.models import Chunk, Collection, Document, DocumentStatus
from retrieval.embedding import matryoshka_prefix, prefix_index_ddl


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
    create_index: bool = True,
) -> Collection:
    """A collection with its partial HNSW prefix index (committed by the caller). Without
    `create_index`, the caller builds the index after the commit (ingestion.collections)."""
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
    if create_index:
        session.execute(text(prefix_index_ddl(collection.id, index_dim)))
    return collection


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
