"""Compiles structured-output specs against one tokenizer, with an LRU cache of compiled grammars."""

from __future__ import annotations

import threading
from collections import OrderedDict

import xgrammar as xgr
from transformers import PreTrainedTokenizerBase

from inference.grammar.matcher import GrammarBitmask, SequenceGrammar
from inference.grammar.spec import StructuredOutputSpec


class GrammarService:
    """Bound to the engine's tokenizer and the model's vocabulary size (lm_head rows).

    `vocab_size` may exceed the tokenizer's (padded lm_head): the padding ids are never allowed.
    `stop_token_ids` default to the tokenizer's EOS; pass the engine's stop ids when it has more.
    Thread-safe: the front-end may compile while the engine loop masks. `max_threads` bounds
    xgrammar's compile and batch-mask threads.
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        *,
        vocab_size: int | None = None,
        stop_token_ids: list[int] | None = None,
        cache_size: int = 128,
        max_threads: int = 1,
    ) -> None:
        self.tokenizer_info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids
        )
        self.vocab_size = self.tokenizer_info.vocab_size
        # NOTE: xgrammar's own cache is off: ours is keyed by the spec and bounded by entry count.
        self._compiler = xgr.GrammarCompiler(
            self.tokenizer_info, max_threads=max_threads, cache_enabled=False
        )
        self._cache: OrderedDict[str, xgr.CompiledGrammar] = OrderedDict()
        self._cache_size = cache_size
        self._max_threads = max_threads
        self._lock = threading.Lock()

    def cached(self, spec: StructuredOutputSpec) -> bool:
        with self._lock:
            return spec.cache_key in self._cache

    def compile(self, spec: StructuredOutputSpec) -> xgr.CompiledGrammar:
        """The compiled grammar of `spec` (cached); InvalidRequestError if it cannot be built."""
        with self._lock:
            if (hit := self._cache.get(spec.cache_key)) is not None:
                self._cache.move_to_end(spec.cache_key)
                return hit
        compiled = self._compiler.compile_grammar(spec.grammar)
        with self._lock:
            self._cache[spec.cache_key] = compiled
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return compiled

    def sequence_grammar(self, spec: StructuredOutputSpec) -> SequenceGrammar:
        """A fresh matcher for one sequence of a request constrained by `spec`."""
        return SequenceGrammar(self.compile(spec))

    def bitmask(self) -> GrammarBitmask:
        """The batch masker the engine keeps for its sampling step."""
        return GrammarBitmask(self.vocab_size, self._max_threads)
