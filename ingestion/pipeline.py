"""One document through parse -> chunk -> embed -> store. Celery-free, so tests and the benchmark
can drive it directly; ingestion/tasks.py wraps it in a task.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session, sessionmaker

from core.database import session_scope
from core.models import Chunk, Document, DocumentStatus
from core.settings import Settings
from ingestion import state
from ingestion.blobs import BlobStore
from ingestion.chunking import ChunkDraft, ChunkingConfig, chunk_document
from ingestion.errors import PermanentError
from ingestion.parsers import parse
from retrieval.embedding import Embedder, get_embedder, matryoshka_prefix

log = logging.getLogger(__name__)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class PipelineContext:
    settings: Settings
    sessions: sessionmaker[Session]
    blobs: BlobStore
    embedder_for: Callable[[str], Embedder]

    @classmethod
    def create(cls, settings: Settings, sessions: sessionmaker[Session]) -> PipelineContext:
        device = settings.ingestion.device
        return cls(
            settings, sessions, BlobStore.for_data_dir(settings.data_dir), lambda m: get_embedder(m, device)
        )


class Heartbeat:
    """Keeps the claim fresh from a thread, whatever stage runs (a big PDF can parse for minutes)."""

    def __init__(self, sessions: sessionmaker[Session], claim: state.Claim, interval_s: float) -> None:
        self._sessions, self._claim, self._interval = sessions, claim, interval_s
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ingest-heartbeat", daemon=True)

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                with session_scope(self._sessions) as session:
                    state.heartbeat(session, self._claim)
            except Exception:  # a missed beat is harmless; recovery waits several intervals
                log.warning("heartbeat failed", exc_info=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopping.set()
        self._thread.join()


def embed_with_reuse(
    sessions: sessionmaker[Session], collection_id: uuid.UUID, texts: list[str], embedder: Embedder
) -> tuple[np.ndarray, int, int]:
    """Vectors for `texts`, re-using any the collection already stores for an identical text.

    Returns (vectors, newly encoded, reused). NOTE: reuse is sound because a collection has one model.
    """
    hashes = [text_hash(t) for t in texts]
    with session_scope(sessions) as session:
        rows = session.execute(
            select(Chunk.text_hash, Chunk.embedding)
            .where(Chunk.collection_id == collection_id, Chunk.text_hash.in_(set(hashes)))
            .where(Chunk.embedding.is_not(None))
            .distinct(Chunk.text_hash)
        ).all()
    known = {h: np.asarray(v, dtype=np.float32) for h, v in rows}
    missing = list(dict.fromkeys(h for h in hashes if h not in known))
    reused = sum(1 for h in hashes if h in known)
    if missing:
        first_text = dict(zip(hashes, texts, strict=True))
        encoded = embedder.encode([first_text[h] for h in missing])
        known.update(zip(missing, encoded, strict=True))
    vectors = np.stack([known[h] for h in hashes]) if hashes else np.zeros((0, embedder.dim), np.float32)
    return vectors, len(missing), reused


def _chunk_rows(
    claim: state.Claim, drafts: list[ChunkDraft], vectors: np.ndarray, index_dim: int
) -> list[dict]:
    prefixes = matryoshka_prefix(vectors, index_dim)
    return [
        {
            "id": uuid.uuid4(),
            "document_id": claim.document_id,
            "collection_id": claim.collection_id,
            "ordinal": ordinal,
            "text": draft.text,
            "text_hash": text_hash(draft.text),
            "token_count": draft.token_count,
            "char_start": draft.char_start,
            "char_end": draft.char_end,
            "page": draft.page,
            "heading_path": draft.heading_path,
            "metadata_": draft.metadata,
            "embedding": vectors[ordinal],
            "embedding_prefix": prefixes[ordinal],
        }
        for ordinal, draft in enumerate(drafts)
    ]


def _stage(ctx: PipelineContext, claim: state.Claim, status: DocumentStatus) -> None:
    with session_scope(ctx.sessions) as session:
        state.set_stage(session, claim, status)


def _run(ctx: PipelineContext, claim: state.Claim) -> None:
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        data = ctx.blobs.get(claim.blob_key) if claim.blob_key else None
    except FileNotFoundError:
        data = None
    if data is None:
        raise PermanentError("the uploaded bytes are missing from the blob store; upload the file again")
    max_bytes = int(ctx.settings.ingestion.max_file_mb * 1e6)
    parsed = parse(data, claim.filename, max_bytes)
    seconds["parse"] = time.perf_counter() - t0

    _stage(ctx, claim, DocumentStatus.chunking)
    t0 = time.perf_counter()
    embedder = ctx.embedder_for(claim.embedding_model)
    if embedder.dim != claim.embedding_dim:
        raise PermanentError(
            f"model {claim.embedding_model!r} now yields {embedder.dim}-dim vectors but the collection "
            f"holds {claim.embedding_dim}-dim ones; models cannot be mixed in a collection"
        )
    drafts = chunk_document(parsed, ChunkingConfig(**claim.chunking), embedder)
    if not drafts:
        raise PermanentError("no text to index")
    seconds["chunk"] = time.perf_counter() - t0

    _stage(ctx, claim, DocumentStatus.embedding)
    t0 = time.perf_counter()
    vectors, embedded, reused = embed_with_reuse(
        ctx.sessions, claim.collection_id, [d.text for d in drafts], embedder
    )
    seconds["embed"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    with session_scope(ctx.sessions) as session:
        doc, collection = state.lock_for_store(session, claim)
        # NOTE: old version out, new version in, in one transaction: a search sees one or the other.
        session.execute(delete(Chunk).where(Chunk.document_id == doc.id))
        session.execute(insert(Chunk), _chunk_rows(claim, drafts, vectors, collection.index_dim))
        doc.status, doc.error, doc.claimed_by, doc.heartbeat_at = DocumentStatus.indexed, None, None, None
        doc.blob_key = None
        doc.mime_type = parsed.mime_type
        doc.title = doc.title or (parsed.title or claim.filename)[:1000]
        doc.metadata_ = {**doc.metadata_, "kind": parsed.kind, "chunks": len(drafts)}
        seconds["store"] = time.perf_counter() - t0
        state.bump_job(session, claim.job_id, done=1, embedded=embedded, reused=reused, stage_seconds=seconds)
    ctx.blobs.delete(claim.blob_key)


def process_document(ctx: PipelineContext, document_id: uuid.UUID, job_id: uuid.UUID, task_id: str) -> str:
    """Run the document through the pipeline; returns the outcome (indexed, failed, skipped, superseded).

    Permanent errors fail this document only; anything else propagates for the caller to retry.
    """
    with session_scope(ctx.sessions) as session:
        claim = state.claim(session, document_id, job_id, task_id, ctx.settings.ingestion.stale_after_s)
    if claim is None:
        return "skipped"
    try:
        with Heartbeat(ctx.sessions, claim, ctx.settings.ingestion.heartbeat_interval_s):
            _run(ctx, claim)
    except PermanentError as exc:
        with session_scope(ctx.sessions) as session:
            failed = state.fail_document(session, document_id, str(exc), task_id)
        return "failed" if failed else "superseded"
    except state.Superseded:
        _discard_orphan_blob(ctx, claim.blob_key)
        return "superseded"
    return "indexed"


def _discard_orphan_blob(ctx: PipelineContext, key: str | None) -> None:
    """A re-upload replaced the bytes this task read; nobody else will delete them."""
    if not key:
        return
    with session_scope(ctx.sessions) as session:
        referenced = session.execute(select(Document.id).where(Document.blob_key == key).limit(1)).first()
    if referenced is None:
        ctx.blobs.delete(key)
