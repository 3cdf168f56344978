"""Documents through parse -> chunk -> embed -> store. Celery-free, so tests and the benchmark can
drive it directly; ingestion/tasks.py wraps it in a task.

A task carries a small group of documents of one job. Each document stays its own unit of work
(its own claim, stages, failure and store transaction); only the embedding runs over the group's
chunks at once, because the model is several times faster on full, length-sorted batches than on
one document's handful of chunks.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session, sessionmaker

from core.database import session_scope
from core.models import Chunk, Document, DocumentStatus
from core.settings import Settings
from core.tracing import annotate, content, traced
from ingestion import state
from ingestion.blobs import BlobStore
from ingestion.chunking import ChunkDraft, ChunkingConfig, chunk_document
from ingestion.errors import INTERNAL_ERROR, PermanentError, is_transient
from ingestion.parsers import ParsedDocument, parse
from retrieval.embedding import Embedder, matryoshka_prefix
from retrieval.models import RetrievalModels

log = logging.getLogger(__name__)
TIMEOUT = "parse_timeout: processing took longer than the task time limit"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class PipelineContext:
    settings: Settings
    sessions: sessionmaker[Session]
    blobs: BlobStore
    embedder_for: Callable[[str], Embedder]

    @classmethod
    def create(
        cls, settings: Settings, sessions: sessionmaker[Session], models: RetrievalModels
    ) -> PipelineContext:
        """`models`: the process's (ingestion/celery_app.py `worker_models` in a worker)."""
        return cls(settings, sessions, BlobStore.for_data_dir(settings.data_dir), models.embedder)


@dataclass
class Prepared:
    """A parsed and chunked document waiting for its vectors."""

    claim: state.Claim
    parsed: ParsedDocument
    drafts: list[ChunkDraft]
    seconds: dict[str, float] = field(default_factory=dict)


class Heartbeat:
    """Keeps the claims fresh from a thread, whatever stage runs (a big PDF can parse for minutes)."""

    def __init__(self, sessions: sessionmaker[Session], claims: list[state.Claim], interval_s: float) -> None:
        self._sessions, self._claims, self._interval = sessions, claims, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ingest-heartbeat", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                with session_scope(self._sessions) as session:
                    state.heartbeat(session, self._claims)
            except Exception:  # a missed beat is harmless; recovery waits several intervals
                log.warning("heartbeat failed", exc_info=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class EmbedProgress:
    """A group's embedding progress in its job (state.note_embedding), as the model goes: the
    counters a stored document has not taken over (`stored`) are withdrawn at the end, whether
    its documents failed, were superseded or the task is to be retried."""

    def __init__(self, sessions: sessionmaker[Session], job_id: uuid.UUID) -> None:
        self.sessions, self.job_id = sessions, job_id
        self.sent = self.planned = self.stored = 0

    def report(self, sent: int, planned: int) -> None:
        with session_scope(self.sessions) as session:
            state.note_embedding(session, self.job_id, sent - self.sent, planned - self.planned)
        self.sent, self.planned = sent, planned

    def close(self) -> None:
        if self.planned == self.stored:
            return
        try:
            self.report(self.stored, self.stored)
        except Exception:  # the database is away: the counters only mislead until the job ends
            log.warning("job %s: embedding progress not withdrawn", self.job_id, exc_info=True)


@traced("ingest.embed")
def embed_with_reuse(
    sessions: sessionmaker[Session],
    collection_id: uuid.UUID,
    texts: list[str],
    embedder: Embedder,
    group: int | None = None,
    between: Callable[[], None] = lambda: None,
    progress: Callable[[int, int], None] = lambda sent, planned: None,
) -> tuple[np.ndarray, list[bool]]:
    """Vectors for `texts`, re-using any the collection already stores for an identical text.

    Returns the vectors and, per text, whether it was sent to the model (only the first of equal
    texts is). The model runs over `group` texts at a time, `between()` before each of its batches
    (it raises to stop: the documents were cancelled or deleted); `progress(sent, planned)` is told
    the texts to send before the first group and after each one. NOTE: reuse is sound because a
    collection has exactly one model.
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
    first = {h: i for i, h in reversed(list(enumerate(hashes)))}
    fresh = [h not in known and first[h] == i for i, h in enumerate(hashes)]
    missing = [i for i, new in enumerate(fresh) if new]
    step = group or max(1, len(missing))
    if missing:
        progress(0, len(missing))
    for at in range(0, len(missing), step):
        part = missing[at : at + step]
        vectors = embedder.encode([texts[i] for i in part], between=between)
        known.update(zip((hashes[i] for i in part), vectors, strict=True))
        progress(at + len(part), len(missing))
    vectors = np.stack([known[h] for h in hashes]) if hashes else np.zeros((0, embedder.dim), np.float32)
    return vectors, fresh


def _advance(ctx: PipelineContext, claims: list[state.Claim], status: DocumentStatus, outcomes: dict) -> list:
    """One statement moves the group to the next stage; documents we lost meanwhile drop out."""
    with session_scope(ctx.sessions) as session:
        ours = state.set_stage(session, claims, status)
    for claim in claims:
        if claim.document_id not in ours:
            outcomes[claim.document_id] = "superseded"
            _discard_orphan_blob(ctx, claim.blob_key)
    return [c for c in claims if c.document_id in ours]


def _still_wanted(ctx: PipelineContext, claims: list[state.Claim]) -> Callable[[], None]:
    """A check that raises Superseded once none of `claims` is ours (cancelled, deleted, re-uploaded)."""

    def check() -> None:
        with session_scope(ctx.sessions) as session:
            if not state.still_claimed(session, claims):
                raise state.Superseded("the documents were cancelled, deleted or re-uploaded")

    return check


@traced("ingest.parse")
def _parse(ctx: PipelineContext, claim: state.Claim) -> Prepared:
    annotate({"groundwork.document_id": str(claim.document_id), "groundwork.job_id": str(claim.job_id)})
    _still_wanted(ctx, [claim])()  # a cancel during a sibling's long parse skips this one
    t0 = time.perf_counter()
    try:
        data = ctx.blobs.get(claim.blob_key) if claim.blob_key else None
    except FileNotFoundError:
        data = None
    if data is None:
        raise PermanentError(
            "the uploaded bytes are missing from the blob store; upload the file again", "blob_missing"
        )
    knobs = ctx.settings.ingestion
    parsed = parse(
        data,
        claim.filename,
        int(knobs.max_file_mb * 1e6),
        int(knobs.max_unpacked_mb * 1e6),
        knobs.max_parsed_chars,
        knobs.ocr_max_pages,
    )
    annotate({"groundwork.bytes": len(data), "groundwork.parsed.text": content(parsed.text)})
    del data
    # NOTE: Office parsers stop early at the cap; every other parser is checked here, after it ran.
    if len(parsed.text) > knobs.max_parsed_chars:
        raise PermanentError(
            f"the parsed text has {len(parsed.text):,} characters; at most {knobs.max_parsed_chars:,} "
            "(ingestion.max_parsed_chars)",
            "text_too_large",
        )
    return Prepared(claim, parsed, [], {"parse": time.perf_counter() - t0})


@traced("ingest.chunk")
def _chunk(ctx: PipelineContext, item: Prepared) -> None:
    t0 = time.perf_counter()
    claim = item.claim
    embedder = ctx.embedder_for(claim.embedding_model)
    if embedder.dim != claim.embedding_dim:
        raise PermanentError(
            f"model {claim.embedding_model!r} now yields {embedder.dim}-dim vectors but the collection "
            f"holds {claim.embedding_dim}-dim ones; models cannot be mixed in a collection",
            "model_mismatch",
        )
    title = item.parsed.title or claim.filename
    wanted = _still_wanted(ctx, [claim])
    wanted()
    config = ChunkingConfig(**claim.chunking)
    item.drafts = chunk_document(item.parsed, config, embedder, title, between=wanted)
    annotate({"groundwork.document_id": str(claim.document_id), "groundwork.chunks": len(item.drafts)})
    if not item.drafts:
        raise PermanentError("no text to index", "no_text")
    item.seconds["chunk"] = time.perf_counter() - t0


def _chunk_rows(item: Prepared, vectors: np.ndarray, index_dim: int) -> list[dict]:
    prefixes = matryoshka_prefix(vectors, index_dim)
    return [
        {
            "id": uuid.uuid4(),
            "document_id": item.claim.document_id,
            "collection_id": item.claim.collection_id,
            "ordinal": ordinal,
            "text": draft.text,
            "text_hash": text_hash(draft.embed_text),  # the reuse key: equal embedded texts
            "token_count": draft.token_count,
            "char_start": draft.char_start,
            "char_end": draft.char_end,
            "page": draft.page,
            "heading_path": draft.heading_path,
            "metadata_": draft.metadata,
            "embedding": vectors[ordinal],
            "embedding_prefix": prefixes[ordinal],
        }
        for ordinal, draft in enumerate(item.drafts)
    ]


@traced("ingest.store")
def _store(ctx: PipelineContext, item: Prepared, vectors: np.ndarray, embedded: int) -> None:
    t0 = time.perf_counter()
    claim = item.claim
    with session_scope(ctx.sessions) as session:
        doc, collection = state.lock_for_store(session, claim)
        # NOTE: old version out, new version in, in one transaction: a search sees one or the other.
        session.execute(delete(Chunk).where(Chunk.document_id == doc.id))
        session.execute(insert(Chunk), _chunk_rows(item, vectors, collection.index_dim))
        warnings = item.parsed.warnings
        status = DocumentStatus.indexed_with_warnings if warnings else DocumentStatus.indexed
        doc.status, doc.error, doc.claimed_by, doc.heartbeat_at = status, None, None, None
        doc.blob_key = None
        doc.mime_type = item.parsed.mime_type
        doc.title = doc.title or (item.parsed.title or claim.filename)[:1000]
        metadata = {k: v for k, v in doc.metadata_.items() if k != "warnings"}
        doc.metadata_ = {**metadata, "kind": item.parsed.kind, "chunks": len(item.drafts)}
        if warnings:
            doc.metadata_ = {**doc.metadata_, "warnings": warnings}
        item.seconds["store"] = time.perf_counter() - t0
        state.bump_job(
            session,
            claim.job_id,
            done=1,
            embedded=embedded,
            reused=len(item.drafts) - embedded,
            stage_seconds=item.seconds,
        )
    ctx.blobs.delete(claim.blob_key)


def _fail(ctx: PipelineContext, claim: state.Claim, reason: str) -> str:
    with session_scope(ctx.sessions) as session:
        return (
            "failed"
            if state.fail_document(session, claim.document_id, reason, claim.task_id)
            else "superseded"
        )


def _isolated(ctx: PipelineContext, claim: state.Claim, outcomes: dict, step: Callable[[], object]) -> bool:
    """Run one document's step; True if it succeeded. The document's own failure is recorded;
    transient errors propagate (the task retries the group)."""
    try:
        step()
        return True
    except PermanentError as exc:
        outcomes[claim.document_id] = _fail(ctx, claim, exc.reason)
    except SoftTimeLimitExceeded:
        log.warning("document %s: task time limit reached", claim.document_id)
        outcomes[claim.document_id] = _fail(ctx, claim, TIMEOUT)
    except state.Superseded:
        outcomes[claim.document_id] = "superseded"
        _discard_orphan_blob(ctx, claim.blob_key)
    except Exception as exc:
        if is_transient(exc):
            raise
        log.exception("document %s: unexpected error", claim.document_id)
        outcomes[claim.document_id] = _fail(ctx, claim, INTERNAL_ERROR)
    return False


def process_documents(
    ctx: PipelineContext, job_id: uuid.UUID, document_ids: list[uuid.UUID], task_id: str
) -> dict[uuid.UUID, str]:
    """Run documents of one job through the pipeline; returns each one's outcome (indexed, failed,
    skipped, superseded). Only transient errors escape, for the caller to retry the whole group
    (documents already indexed are then skipped)."""
    with session_scope(ctx.sessions) as session:
        knobs = ctx.settings.ingestion
        claims = state.claim_all(
            session, job_id, document_ids, task_id, knobs.stale_after_s, knobs.max_attempts
        )
    claimed = {c.document_id for c in claims}
    outcomes: dict[uuid.UUID, str] = {d: "skipped" for d in document_ids if d not in claimed}
    if not claims:
        return outcomes
    with Heartbeat(ctx.sessions, claims, ctx.settings.ingestion.heartbeat_interval_s):
        items: list[Prepared] = []
        for claim in claims:
            _isolated(ctx, claim, outcomes, lambda c=claim: items.append(_parse(ctx, c)))
        items = _surviving(items, _advance(ctx, [i.claim for i in items], DocumentStatus.chunking, outcomes))
        items = [i for i in items if _isolated(ctx, i.claim, outcomes, lambda i=i: _chunk(ctx, i))]
        items = _surviving(items, _advance(ctx, [i.claim for i in items], DocumentStatus.embedding, outcomes))
        if items:
            _embed_and_store(ctx, items, outcomes)
    return outcomes


def _surviving(items: list[Prepared], claims: list[state.Claim]) -> list[Prepared]:
    ours = {c.document_id for c in claims}
    return [i for i in items if i.claim.document_id in ours]


def _embed_and_store(ctx: PipelineContext, items: list[Prepared], outcomes: dict) -> None:
    """One embedding pass over the group (one job, hence one collection and model), then one store
    transaction per document."""
    t0 = time.perf_counter()
    first = items[0].claim
    texts = [d.embed_text for item in items for d in item.drafts]
    claims = [i.claim for i in items]
    live = EmbedProgress(ctx.sessions, first.job_id)
    try:
        try:
            vectors, fresh = embed_with_reuse(
                ctx.sessions,
                first.collection_id,
                texts,
                ctx.embedder_for(first.embedding_model),
                ctx.settings.ingestion.embed_group,
                _still_wanted(ctx, claims),
                live.report,
            )
        except state.Superseded:
            log.info("job %s: embedding stopped, its documents are no longer wanted", first.job_id)
            for claim in claims:
                outcomes[claim.document_id] = "superseded"
                _discard_orphan_blob(ctx, claim.blob_key)
            return
        share = (time.perf_counter() - t0) / max(1, len(texts))
        offset = 0
        for item in items:
            n = len(item.drafts)
            item.seconds["embed"] = share * n  # the group's embedding time, split by chunk count
            rows, embedded = vectors[offset : offset + n], sum(fresh[offset : offset + n])
            if _isolated(ctx, item.claim, outcomes, lambda i=item, r=rows, e=embedded: _store(ctx, i, r, e)):
                outcomes[item.claim.document_id] = "indexed"
                live.stored += embedded
            offset += n
    finally:
        live.close()


def _discard_orphan_blob(ctx: PipelineContext, key: str | None) -> None:
    """A re-upload replaced the bytes this task read; nobody else will delete them."""
    if not key:
        return
    with session_scope(ctx.sessions) as session:
        referenced = session.execute(select(Document.id).where(Document.blob_key == key).limit(1)).first()
    if referenced is None:
        ctx.blobs.delete(key)
