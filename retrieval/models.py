"""The models retrieval and ingestion load, once per process: embedders and cross-encoders by spec.

Loading one costs seconds and hundreds of MB, so every user in a process shares it: the process's
one `RetrievalModels` is built by whoever owns the process (the Platform for the API, the CLI and a
worker's evaluations, an ingestion worker's pipeline context, a benchmark) and handed down. Nothing
here is module state.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from core.registry import resolve_model
from core.tracing import traced
from retrieval.embedding import Embedder


class RetrievalModels:
    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self._embedders: dict[str, Embedder] = {}
        self._cross_encoders: dict[str, Any] = {}
        # NOTE: one load per spec, whichever thread asks first; a cross-encoder's first load (seconds)
        # does not hold up query embedding.
        self._embedders_lock, self._cross_encoders_lock = threading.Lock(), threading.Lock()

    def embedder(self, spec: str) -> Embedder:
        """The embedding model of `spec` (registry name, local path or hub id), loaded on first use."""
        with self._embedders_lock:
            if spec not in self._embedders:
                self._embedders[spec] = Embedder(spec, device=self.device)
            return self._embedders[spec]

    @traced("retrieval.embed")
    def encode(self, spec: str, texts: list[str]) -> np.ndarray:
        """Normalised vectors of `texts` under `spec` (what dense search queries with)."""
        return self.embedder(spec).encode(texts)

    def cross_encoder(self, spec: str) -> Any:
        """A sentence-transformers CrossEncoder of `spec`, loaded on first use."""
        with self._cross_encoders_lock:
            if spec not in self._cross_encoders:
                from sentence_transformers import CrossEncoder  # heavy import, only when reranking

                self._cross_encoders[spec] = CrossEncoder(str(resolve_model(spec).path), device=self.device)
            return self._cross_encoders[spec]
