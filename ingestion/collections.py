"""Collections: model and dimensions are fixed at creation; the indexed Matryoshka prefix can be
changed later and is rebuilt from the stored full vectors, without re-embedding.
"""

from __future__ import annotations

import uuid

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from core.models import Chunk, Collection, Document
from ingestion.chunking import ChunkingConfig
from retrieval.corpus import build_prefix_index, drop_prefix_index  # noqa: F401 - the API's, from here
from retrieval.corpus import create_collection as insert_collection
from retrieval.embedding import matryoshka_prefix
from retrieval.models import RetrievalModels

REINDEX_BATCH = 2000


class CollectionConflict(ValueError):
    """The change would mix models or dimensions inside one collection."""


def resolve_index_dim(requested: int | None, embedding_dim: int) -> int:
    dim = requested or embedding_dim
    if not 1 <= dim <= embedding_dim:
        raise ValueError(f"index_dim must be within 1..{embedding_dim} (the model's dimension)")
    return dim


def create_collection(
    session: Session,
    tenant_id: uuid.UUID,
    name: str,
    *,
    models: RetrievalModels,
    embedding_model: str,
    chunking: ChunkingConfig,
    index_dim: int | None = None,
    description: str = "",
) -> Collection:
    """Insert the collection in the caller's transaction; after the commit, the caller builds its
    (empty) prefix index with `build_prefix_index`. `models`: the process's, to learn the model's
    dimension (loading it: ModelNotAvailable if it cannot be)."""
    embedding_dim = models.embedder(embedding_model).dim
    return insert_collection(
        session,
        tenant_id,
        name,
        embedding_model=embedding_model,
        embedding_dim=embedding_dim,
        index_dim=resolve_index_dim(index_dim, embedding_dim),
        chunking=chunking.model_dump(),
        description=description,
    )


def change_index_dim(session: Session, collection: Collection, index_dim: int) -> int:
    """Re-derive every chunk's prefix at `index_dim` from the stored full vectors and drop the old
    index; returns chunks updated. The caller drops the old index first (`drop_prefix_index`),
    commits, then calls `build_prefix_index`.

    NOTE: the index cannot be rebuilt in this transaction: a plain CREATE INDEX also indexes the
    row versions this transaction replaced, whose old-length prefixes fail the `vector(D)` cast.
    CREATE INDEX CONCURRENTLY after the commit sees only live rows. Meanwhile searches use the new
    expression without an index (exact, slower). Workers share-lock the collection row while
    storing, so none writes an old-length prefix after this commits.
    """
    index_dim = resolve_index_dim(index_dim, collection.embedding_dim)
    session.execute(select(Collection.id).where(Collection.id == collection.id).with_for_update())
    if index_dim == collection.index_dim:
        return 0
    table = Chunk.__table__
    set_prefix = (
        update(table).where(table.c.id == bindparam("chunk_id")).values(embedding_prefix=bindparam("prefix"))
    )
    updated, last_id = 0, None
    while True:
        query = select(Chunk.id, Chunk.embedding).where(Chunk.collection_id == collection.id)
        query = query.where(Chunk.embedding.is_not(None)).order_by(Chunk.id).limit(REINDEX_BATCH)
        rows = session.execute(query if last_id is None else query.where(Chunk.id > last_id)).all()
        if not rows:
            break
        prefixes = matryoshka_prefix([r.embedding for r in rows], index_dim)
        session.execute(
            set_prefix, [{"chunk_id": r.id, "prefix": p} for r, p in zip(rows, prefixes, strict=True)]
        )
        updated += len(rows)
        last_id = rows[-1].id
    collection.index_dim = index_dim
    return updated


def check_model_change(
    session: Session, collection: Collection, embedding_model: str, models: RetrievalModels
) -> bool:
    """Switch an empty collection's model; True if its index must be rebuilt (after the commit)."""
    if embedding_model == collection.embedding_model:
        return False
    has_docs = session.execute(
        select(Document.id).where(Document.collection_id == collection.id).limit(1)
    ).first()
    if has_docs:
        raise CollectionConflict(
            f"collection {collection.name!r} holds documents embedded with {collection.embedding_model!r}; "
            "models cannot be mixed in one collection (create a new collection for the new model)"
        )
    collection.embedding_model = embedding_model
    collection.embedding_dim = models.embedder(embedding_model).dim
    collection.index_dim = min(collection.index_dim, collection.embedding_dim)
    return True
