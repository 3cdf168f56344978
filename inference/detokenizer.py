"""Incremental detokenization and stop strings for one request.

Decoding token by token breaks multi-byte characters and drops the leading space some tokenizers
attach to a word piece, so each new token is decoded together with a few previous ones and only the
text beyond what those already produced is emitted; an incomplete UTF-8 sequence (U+FFFD at the end)
waits for the next token.
"""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase

_CONTEXT_TOKENS = 5  # prompt tokens decoded along with the first output tokens


class Detokenizer:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, prompt_ids: list[int], stop: list[str]) -> None:
        self.tokenizer = tokenizer
        self.ids = list(prompt_ids[-_CONTEXT_TOKENS:])
        self.prefix_offset = 0
        self.read_offset = len(self.ids)
        self.text = ""  # output text so far (cut at the stop string once one matched)
        self.stop = [s for s in stop if s]
        # NOTE: while a stop string could still be completing, its possible start is held back from the
        # stream, so a client never receives text that the final response trims away.
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.sent = 0
        self.stopped = False  # a stop string matched; the text ends before it

    def _decode(self, ids: list[int]) -> str:
        # NOTE: the Rust tokenizer directly where transformers would add nothing to its result: the
        # wrapper's argument handling cost 6x the decode itself, twice per token of every sequence.
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None and not getattr(self.tokenizer, "clean_up_tokenization_spaces", False):
            return backend.decode(ids, skip_special_tokens=True)
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def _new_text(self, final: bool) -> str:
        prefix = self._decode(self.ids[self.prefix_offset : self.read_offset])
        full = self._decode(self.ids[self.prefix_offset :])
        if len(full) <= len(prefix) or (full.endswith("\ufffd") and not final):
            return ""
        self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
        return full[len(prefix) :]

    def flush(self) -> None:
        """At the end of a request: emit text still waiting for bytes that will never come."""
        if self.read_offset < len(self.ids):
            self.text += self._new_text(final=True)

    def push(self, token_id: int) -> bool:
        """Add one output token; True if a stop string now appears (the text is cut before it)."""
        self.ids.append(token_id)
        new = self._new_text(final=False)
        if not new:
            return False
        search_from = max(0, len(self.text) - self.hold)
        self.text += new
        hits = [at for at in (self.text.find(s, search_from) for s in self.stop) if at != -1]
        if hits:
            self.text = self.text[: min(hits)]
            self.stopped = True
        return self.stopped

    def take(self, finished: bool) -> str:
        """Text not yet streamed; while unfinished, keep back a tail that may start a stop string."""
        end = len(self.text) if finished else max(self.sent, len(self.text) - self.hold)
        delta = self.text[self.sent : end]
        self.sent = end
        return delta
