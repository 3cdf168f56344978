"""Neighbouring-chunk expansion against real chunk rows in Postgres."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from sqlalchemy import insert

from agents.qa.neighbors import expand_neighbors
from agents.qa.sources import Source
from core.models import Chunk, Document, DocumentStatus
from retrieval.corpus import create_collection

pytestmark = pytest.mark.integration

TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")
# Five overlapping windows over one document: "w0 w1 ... w19", four words each, one word shared.
WORDS = [f"w{i}" for i in range(20)]
TEXT = " ".join(WORDS)


def _chunks(doc_id, collection_id):
    rows, start = [], 0
    for ordinal, first in enumerate(range(0, 16, 3)):
        words = WORDS[first : first + 4]
        start = TEXT.index(words[0] + " ") if first else 0
        text = " ".join(words)
        vector = np.ones(8, dtype=np.float32) / np.sqrt(8)
        rows.append(
            dict(id=uuid.uuid4(), document_id=doc_id, collection_id=collection_id, ordinal=ordinal, text=text,
                 text_hash=str(ordinal), token_count=4, char_start=start, char_end=start + len(text),
                 heading_path=[], metadata_={}, embedding=vector, embedding_prefix=vector)
        )  # fmt: skip
    return rows


def test_hits_are_widened_without_repeating_text(session_factory):
    with session_factory() as s:
        collection = create_collection(s, TENANT, f"nb-{uuid.uuid4().hex[:8]}", "m", 8, 8)
        doc_id = uuid.uuid4()
        s.execute(
            insert(Document),
            [dict(id=doc_id, collection_id=collection.id, source_id="d.txt", content_hash="x",
                  status=DocumentStatus.indexed, metadata_={})],
        )  # fmt: skip
        rows = _chunks(doc_id, collection.id)
        s.execute(insert(Chunk), rows)
        s.flush()
        hit = lambda r, score: Source(0, str(r["id"]), str(doc_id), "d", r["text"], score)  # noqa: E731
        sources = [hit(rows[2], 0.9), hit(rows[3], 0.8), hit(rows[0], 0.5)]
        widened = expand_neighbors(s, sources, {src.chunk_id: 1 for src in sources})
        s.rollback()
    first, second = widened[0], widened[1]
    # the best hit (ordinal 2) takes ordinals 1-3; ordinal 3's own hit is inside it and dropped;
    # the hit on ordinal 0 keeps only itself (its neighbour 1 is taken)
    assert first.text == "w3 w4 w5 w6 w7 w8 w9 w10 w11 w12"
    assert (first.char_start, first.char_end) == (TEXT.index("w3 "), TEXT.index("w12") + 3)
    assert len(widened) == 2 and second.text == "w0 w1 w2 w3"
    unchanged = expand_neighbors(s, sources, {})
    assert [u.text for u in unchanged] == [src.text for src in sources]
