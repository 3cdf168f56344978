"""The collection a run searches: an existing one, or one the run fills with its dataset's corpus
(one chunk per document, as BEIR evaluations do), in committed batches that a resumed run skips.
The documents count in the tenant's quotas like uploaded ones: a batch that would pass a quota
fails the run with the reason (and the batches before it stay)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from sqlalchemy import select

from core.database import session_scope
from core.models import Collection, Document, EvalRun
from core.quotas import check_quota, lock_usage
from evals.datasets import DatasetError, doc_text
from retrieval.corpus import CorpusDoc, add_documents, build_prefix_index, create_collection

BATCH = 256


def ensure_collection(
    ctx, run_id: uuid.UUID, corpus: Sequence[CorpusDoc], beat: Callable[..., None]
) -> uuid.UUID:
    """The run's collection id, with every corpus document in it."""
    settings = ctx.settings
    with session_scope(ctx.sessions) as session:
        run = session.get(EvalRun, run_id)
        if run.collection_id is not None and (run.progress.get("ingested") or not corpus):
            return run.collection_id
        if run.collection_id is None:
            if not corpus:
                raise DatasetError("the dataset has no corpus: give an existing collection to evaluate")
            embedder = ctx.models.embedder(settings.embedding_model)
            name = run.config.get("collection_name") or f"eval-{run_id.hex[:12]}"
            collection = create_collection(
                session,
                run.tenant_id,
                name,
                settings.embedding_model,
                embedder.dim,
                settings.ingestion.index_dim,
            )
            run.collection_id = collection.id
            if not run.config.get("collection_name"):
                run.config = {**run.config, "throwaway_collection": str(collection.id)}
        collection_id, index_dim = run.collection_id, session.get(Collection, run.collection_id).index_dim
    build_prefix_index(ctx.sessions.kw["bind"], collection_id, index_dim)  # a resumed run finds it built
    _ingest(ctx, collection_id, corpus, beat)
    with session_scope(ctx.sessions) as session:
        beat(session, progress={"stage": "ingested", "ingested": True})
    return collection_id


def _ingest(ctx, collection_id: uuid.UUID, corpus: Sequence[CorpusDoc], beat: Callable[..., None]) -> None:
    with session_scope(ctx.sessions) as session:
        collection = session.get(Collection, collection_id)
        present = set(
            session.scalars(select(Document.source_id).where(Document.collection_id == collection_id))
        )
        embedder = ctx.models.embedder(collection.embedding_model)
        tenant = collection.tenant_id
        todo = [d for d in corpus if d.source_id not in present]
        # Before any embedding: a corpus that cannot fit fails at once (each batch is checked again).
        check_quota(session, tenant, ctx.settings.limits, ctx.settings.data_dir, add_documents=len(todo))
    done = len(corpus) - len(todo)
    for lo in range(0, len(todo), BATCH):
        batch = todo[lo : lo + BATCH]
        vectors = embedder.encode([doc_text(d) for d in batch])
        done += len(batch)
        with session_scope(ctx.sessions) as session:
            lock_usage(session, tenant)
            add_documents(session, session.get(Collection, collection_id), batch, vectors)
            check_quota(session, tenant, ctx.settings.limits, ctx.settings.data_dir)
            beat(session, progress={"stage": "ingesting", "done": done, "total": len(corpus)})
