"""Text embeddings, shared by ingestion (chunk vectors) and retrieval (query vectors).

Vectors are float32, L2-normalised, so cosine similarity is a dot product. Matryoshka: chunks keep
the full vector in `chunks.embedding` and a re-normalised prefix in `chunks.embedding_prefix`; a
per-collection partial HNSW index covers the prefix (pgvector 0.6 has no subvector() and no halfvec,
hence the stored prefix and the expression index). Retrieval must query with *the same expression
and WHERE clause* to hit that index: `prefix_expression(dim)` and `collection_id = '<id>'`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from functools import cached_property

import numpy as np

from core.registry import resolve_model

DEFAULT_BATCH_SIZE = 32
PAD_BUDGET = 128  # padded tokens one extra forward call is worth on CPU (measured order of magnitude)


class Embedder:
    """A sentence-transformers model resolved through the registry.

    `model_id` is the spec it was built from (what a collection records in `embedding_model`).
    """

    def __init__(self, model_spec: str, *, device: str = "cpu", batch_size: int = DEFAULT_BATCH_SIZE):
        from sentence_transformers import SentenceTransformer  # heavy import, only when embedding

        resolved = resolve_model(model_spec)
        if resolved.format == "gguf":
            raise ValueError(f"{model_spec!r} is a GGUF generator, not an embedding model")
        self.model_id = model_spec
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(resolved.path), device=device)
        self.dim: int = int(self.model.get_embedding_dimension())
        # NOTE: encode() is not re-entrant on one model; API threads share one Embedder.
        self._lock = threading.Lock()

    @property
    def tokenizer(self):
        """The model's (fast) Hugging Face tokenizer; chunk sizes are counted with it."""
        return self.model.tokenizer

    @cached_property
    def max_tokens(self) -> int:
        """Content tokens the model sees before truncating (its max length minus special tokens)."""
        return int(self.model.max_seq_length) - self.tokenizer.num_special_tokens_to_add(False)

    def count_tokens(self, texts: list[str]) -> list[int]:
        enc = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [len(ids) for ids in enc]

    def length_batches(self, texts: list[str], batch_size: int) -> list[list[int]]:
        """Indices grouped into batches of similar token length.

        NOTE: a batch is padded to its longest text, and a few texts (one document's chunks) mix
        short and long ones; cutting a batch once padding would waste more than `PAD_BUDGET` tokens
        costs an extra forward call but saves the padded compute.
        """
        lengths = [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        lengths = [min(n, self.max_tokens) for n in lengths]
        batches: list[list[int]] = []
        for i in sorted(range(len(texts)), key=lengths.__getitem__):
            current = batches[-1] if batches else None
            if (
                current is None
                or len(current) >= batch_size
                or len(current) * (lengths[i] - lengths[current[-1]]) > PAD_BUDGET
            ):
                batches.append([i])
            else:
                current.append(i)
        return batches

    def encode(
        self, texts: list[str], batch_size: int | None = None, between: Callable[[], None] | None = None
    ) -> np.ndarray:
        """float32 [len(texts), dim], each row L2-normalised, in the order of `texts`.

        `between()` runs before each model batch and may raise to stop (a cancelled ingestion: a
        batch is the longest stretch of CPU that cannot be interrupted)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        batch_size = batch_size or self.batch_size
        with self._lock:
            for batch in self.length_batches(list(texts), batch_size):
                if between is not None:
                    between()
                out[batch] = self.model.encode(
                    [texts[i] for i in batch],
                    batch_size=len(batch),
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        return out


def matryoshka_prefix(vectors: np.ndarray, dim: int) -> np.ndarray:
    """The first `dim` components of each row, re-normalised to unit length (float32)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        return matryoshka_prefix(vectors[None, :], dim)[0]
    if not 0 < dim <= vectors.shape[1]:
        raise ValueError(f"prefix dimension {dim} is outside 1..{vectors.shape[1]}")
    prefix = vectors[:, :dim]
    norms = np.linalg.norm(prefix, axis=1, keepdims=True)
    return np.ascontiguousarray(prefix / np.maximum(norms, 1e-12), dtype=np.float32)


def prefix_expression(dim: int) -> str:
    """The indexed SQL expression; ORDER BY `<expr> <=> :query` uses the HNSW index."""
    return f"(embedding_prefix::vector({int(dim)}))"


def prefix_index_name(collection_id: uuid.UUID | str) -> str:
    return f"ix_chunks_prefix_{uuid.UUID(str(collection_id)).hex}"


def prefix_index_ddl(collection_id: uuid.UUID | str, dim: int, concurrently: bool = False) -> str:
    """CREATE INDEX for one collection's prefix vectors (cosine HNSW, partial on the collection)."""
    cid = uuid.UUID(str(collection_id))  # validated: the id is interpolated into DDL
    how = "CONCURRENTLY " if concurrently else ""
    return (
        f"CREATE INDEX {how}IF NOT EXISTS {prefix_index_name(cid)} ON chunks "
        f"USING hnsw ({prefix_expression(dim)} vector_cosine_ops) WHERE collection_id = '{cid}'"
    )
