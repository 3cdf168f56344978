"""The engine's side of structured output: one grammar per constrained request, keyed by request id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

from inference.grammar.matcher import GrammarBitmask, SequenceGrammar
from inference.grammar.service import GrammarService
from inference.grammar.spec import StructuredOutputSpec


class _HasRequestId(Protocol):
    request_id: str


class EngineGrammars:
    """Tracks the grammar of every constrained request the engine holds.

    `bitmask` is the engine's `bitmask_fn`; `accept` runs after sampling; `remove` when a request
    leaves the engine. Only the engine thread may call `add`/`bitmask`/`accept`/`remove`;
    `service.compile` may be called from any thread (to validate and warm the cache early).
    """

    def __init__(self, service: GrammarService) -> None:
        self.service = service
        self._masker: GrammarBitmask = service.bitmask()
        self._grammars: dict[str, SequenceGrammar] = {}

    def add(self, request_id: str, spec: StructuredOutputSpec | None) -> None:
        """Start the grammar of a new request (InvalidRequestError if `spec` cannot be compiled)."""
        if spec is not None:
            self._grammars[request_id] = self.service.sequence_grammar(spec)

    def get(self, request_id: str) -> SequenceGrammar | None:
        """The request's grammar, for speculative decoding (`is_allowed`, `rollback`)."""
        return self._grammars.get(request_id)

    def bitmask(self, seqs: Sequence[_HasRequestId]) -> torch.Tensor | None:
        """Packed int32 token bitmask for the rows about to sample; None if none is constrained."""
        if not self._grammars:
            return None
        return self._masker.fill([self._grammars.get(s.request_id) for s in seqs])

    def accept(self, request_id: str, token_id: int) -> bool:
        """Advance the request's grammar by its sampled token; True once the grammar is finished
        (the engine ends the request with finish_reason "stop")."""
        grammar = self._grammars.get(request_id)
        if grammar is None:
            return False
        if not grammar.accept(token_id):
            # NOTE: the bitmask makes this impossible unless sampling bypassed it: a bug, not input.
            raise RuntimeError(f"request {request_id}: sampled token {token_id} violates its grammar")
        return grammar.is_terminated()

    def remove(self, request_id: str) -> None:
        self._grammars.pop(request_id, None)
