"""Chunkers, chosen per collection (`Collection.chunking` holds a `ChunkingConfig`). Every chunk is
a span of the parsed text inside one segment, so it inherits that segment's page and heading path,
and `text == parsed.text[char_start:char_end]` always holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from ingestion.chunking.fixed import fixed_windows
from ingestion.chunking.recursive import recursive_spans
from ingestion.chunking.semantic import semantic_spans
from ingestion.chunking.tables import row_spans, table_context
from ingestion.chunking.words import WordIndex
from ingestion.parsers.base import ParsedDocument


class ChunkingConfig(BaseModel):
    strategy: Literal["fixed", "recursive", "semantic"] = "fixed"
    chunk_size: int = Field(default=256, ge=8, le=8192, description="Token budget per chunk.")
    chunk_overlap: int = Field(default=32, ge=0, description="Tokens repeated between fixed windows.")
    title_prefix: bool = Field(
        default=False,
        description="Embed each chunk as 'document title + newline + text' (the stored text is unchanged): "
        "a chunk deep in a long document keeps what it is about.",
    )
    semantic_percentile: float = Field(
        default=90.0,
        gt=0,
        lt=100,
        description="Semantic: cut where the sentence distance exceeds this percentile.",
    )

    @model_validator(mode="after")
    def _overlap_below_half(self) -> ChunkingConfig:
        if self.chunk_overlap * 2 > self.chunk_size:
            raise ValueError("chunk_overlap must be at most half of chunk_size")
        return self


@dataclass
class ChunkDraft:
    text: str
    char_start: int
    char_end: int
    token_count: int
    page: int | None = None
    heading_path: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    embed_text: str = ""  # what the embedding model reads: the text, or title + text

    def __post_init__(self) -> None:
        self.embed_text = self.embed_text or self.text


def chunk_document(
    doc: ParsedDocument,
    config: ChunkingConfig,
    embedder,
    title: str | None = None,
    between: Callable[[], None] | None = None,
) -> list[ChunkDraft]:
    """Chunks of every segment in order. `embedder` gives the tokenizer and the model's input limit;
    `title` (default: the parsed title) prefixes the embedded text under `config.title_prefix`;
    `between()` runs before each batch of sentences the semantic strategy embeds (it may raise to stop).

    NOTE: the budget is capped at what the model reads (`embedder.max_tokens`), less the title's
    tokens when it is prefixed: a longer chunk would be stored whole but embedded truncated.
    """
    prefix = ""
    if config.title_prefix and (title or doc.title):
        prefix = (title or doc.title or "").strip()[:200] + "\n"
    title_tokens = len(embedder.tokenizer(prefix, add_special_tokens=False)["input_ids"]) if prefix else 0
    size = max(8, min(config.chunk_size, embedder.max_tokens - title_tokens))
    overlap = min(config.chunk_overlap, size // 2)
    drafts: list[ChunkDraft] = []
    for segment in doc.segments:
        index = WordIndex(doc.text, segment.start, segment.end, embedder.tokenizer)
        if segment.metadata.get("table"):
            drafts.extend(_table_drafts(doc, segment, index, size, prefix, embedder))
            continue
        if config.strategy == "fixed":
            spans = fixed_windows(index, size, overlap)
        elif config.strategy == "recursive":
            spans = recursive_spans(index, size)
        else:
            spans = semantic_spans(index, size, embedder, config.semantic_percentile, between)
        for i, j in spans:
            start, end = index.char_span(i, j)
            text = doc.text[start:end]
            drafts.append(
                ChunkDraft(
                    text=text,
                    char_start=start,
                    char_end=end,
                    token_count=index.tokens(i, j),
                    page=segment.page,
                    heading_path=list(segment.heading_path),
                    metadata=dict(segment.metadata),
                    embed_text=prefix + text,  # the same string when there is no prefix
                )
            )
    return drafts


def _table_drafts(doc: ParsedDocument, segment, index: WordIndex, size: int, prefix: str, embedder) -> list:
    """A table's chunks: whole rows (chunking/tables.py), whatever the collection's strategy."""
    caption, header = table_context(segment)

    def count(text: str) -> int:
        return len(embedder.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0

    context = "\n".join(p for p in (caption, header) if p)
    budget = max(8, size - count(context))
    drafts = []
    for n, (i, j) in enumerate(row_spans(index, budget)):
        start, end = index.char_span(i, j)
        text = doc.text[start:end]
        # The first chunk starts with the header row itself; later ones get it repeated.
        lead = "\n".join(p for p in (caption, header if n else "") if p)
        drafts.append(
            ChunkDraft(
                text=text,
                char_start=start,
                char_end=end,
                token_count=index.tokens(i, j),
                page=segment.page,
                heading_path=list(segment.heading_path),
                metadata=dict(segment.metadata),
                embed_text=prefix + (lead + "\n" if lead else "") + text,
            )
        )
    return drafts


__all__ = ["ChunkDraft", "ChunkingConfig", "chunk_document"]
