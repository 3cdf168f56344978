"""A small draft model sharing the target's tokenizer proposes tokens autoregressively.

It keeps one shadow sequence per request in its own paged KV pool (no prefix caching), so each
proposal only computes the tokens the draft has not seen yet: the target's tokens since the last
proposal (those the target accepted are already cached) and then one token per guess.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import torch

from inference.attention import select_backend
from inference.block_manager import BlockManager
from inference.loaders import load_model
from inference.model_runner import ModelRunner, ScheduledBatch, kv_block_bytes
from inference.sampling import draw, prepare_logits
from inference.sequence import Sequence
from inference.spec import Proposal

if TYPE_CHECKING:
    from inference.config import EngineConfig

log = logging.getLogger(__name__)


class DraftModelProposer:
    def __init__(self, config: EngineConfig, vocab_size: int, max_model_len: int, max_blocks: int) -> None:
        self.model, _ = load_model(
            config.draft_model_path, config.cache_dir, config.device, config.dtype, config.gguf_quantized
        )
        if self.model.config.vocab_size != vocab_size:
            raise ValueError(
                f"the draft model's vocabulary ({self.model.config.vocab_size}) differs from the target's "
                f"({vocab_size}); they must share the tokenizer"
            )
        # Room for spec_max_batch full-length sequences (more never speculate at once), within the
        # target's pool size. NOTE: when it is full, a proposal frees its shadow and guesses nothing.
        bs = config.block_size
        num_blocks = min(max_blocks, max(1, config.spec_max_batch) * -(-max_model_len // bs))
        self.block_manager = BlockManager(num_blocks, bs, enable_prefix_caching=False)
        # Eager: a draft step feeds one sequence a varying number of tokens.
        backend = select_backend(config.attention_backend, config.device, self.model.config.head_dim)
        self.runner = ModelRunner(self.model, num_blocks, bs, max_model_len, backend)
        log.info(
            "draft model %s: KV pool of %d blocks (%.2f GiB)",
            config.draft_model_path,
            num_blocks,
            num_blocks * kv_block_bytes(self.model.config, bs, config.dtype) / 2**30,
        )
        self._shadows: dict[str, Sequence] = {}

    def _shadow(self, seq: Sequence) -> Sequence:
        """The draft's copy of `seq`, its cache trimmed to the prefix it shares with `seq` now."""
        shadow = self._shadows.get(seq.request_id)
        if shadow is None:
            shadow = Sequence(seq.request_id, [], seq.num_prompt_tokens, seq.params, seq.max_len)
            self._shadows[seq.request_id] = shadow
        # NOTE: the target only ever appends, so the shadow's tokens are the target's tokens of the last
        # proposal followed by the guesses; its K/V stay valid up to where the two still agree.
        # At least the last token is (re)computed: its logits give the first guess.
        common = min(shadow.num_computed_tokens, len(seq.token_ids) - 1)
        for i in range(min(shadow.num_computed_tokens, seq.num_prompt_tokens), common):
            if shadow.token_ids[i] != seq.token_ids[i]:
                common = i
                break
        shadow.token_ids = list(seq.token_ids)
        shadow.num_computed_tokens = common
        return shadow

    @torch.inference_mode()
    def propose(self, seq: Sequence, k: int) -> Proposal:
        shadow = self._shadow(seq)
        guesses: list[int] = []
        rows: list[torch.Tensor] = []
        for _ in range(k):
            n = shadow.num_tokens - shadow.num_computed_tokens
            if not self.block_manager.allocate(shadow, shadow.num_tokens):
                self.forget(seq.request_id)  # pool full: no guesses this time, recompute later
                break
            logits = self.runner.run(ScheduledBatch([shadow], [n], [True]))
            shadow.num_computed_tokens += n
            if seq.params.greedy:
                token = int(logits.argmax())
            else:
                prepare_logits(logits, [shadow])
                probs = logits.softmax(dim=-1)
                token = int(draw(probs, [seq.generator])[0])
                rows.append(probs[0])
            shadow.token_ids.append(token)
            guesses.append(token)
        return Proposal(guesses, torch.stack(rows) if rows else None)

    def forget(self, request_id: str) -> None:
        shadow = self._shadows.pop(request_id, None)
        if shadow is not None:
            self.block_manager.free(shadow)
