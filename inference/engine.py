"""The synchronous engine: each `step()` is schedule -> run the model -> sample -> postprocess.

Not thread-safe: one thread owns it (`AsyncLLMEngine` runs it in a background thread).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import torch

from inference import cpu_attention
from inference.attention import select_backend
from inference.block_manager import BlockManager
from inference.config import EngineConfig, resolve_kv_cache_dtype
from inference.detokenizer import Detokenizer
from inference.loaders import load_model
from inference.model_runner import ModelRunner, ScheduledBatch, kv_block_bytes
from inference.protocol import EngineStats, FinishReason, InvalidRequestError, RequestOutput, SamplingParams
from inference.sampling import sample
from inference.scheduler import Scheduler, SeqUpdate
from inference.sequence import Sequence
from inference.spec import build_proposer
from inference.spec.decoding import SpeculativeDecoder

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from inference.grammar import EngineGrammars
    from inference.grammar.spec import StructuredOutputSpec


class StepError(Exception):
    """A step failed for `request_ids` (finished and freed, so the engine can go on serving the others);
    `outputs` are the step's outputs of the requests it served."""

    def __init__(self, request_ids: list[str], outputs: list[RequestOutput] | None = None) -> None:
        super().__init__(f"engine step failed for {request_ids}")
        self.request_ids = request_ids
        self.outputs = outputs or []


class LLMEngine:
    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        if config.cpu_threads is not None:
            torch.set_num_threads(config.cpu_threads)  # process-wide: the engine is the process's main user
        self.model, self.tokenizer = load_model(
            config.model_path, config.cache_dir, config.device, config.dtype, config.gguf_quantized
        )
        packed_bytes = self.model.pack_weights(config.cpu_packed_rows) if config.cpu_packed_rows > 1 else 0
        if packed_bytes:
            log.info(
                "weights packed for matmuls of up to %d rows (MKL), %.2f GiB more memory",
                config.cpu_packed_rows,
                packed_bytes / 2**30,
            )
        model_cfg = self.model.config
        eos = set(model_cfg.eos_token_ids)
        if self.tokenizer.eos_token_id is not None:
            eos.add(self.tokenizer.eos_token_id)
        self.eos_token_ids = frozenset(eos)
        self.vocab_size = model_cfg.vocab_size
        self.kv_dtype = resolve_kv_cache_dtype(config, self.model.kept_quantized)
        num_blocks = config.num_kv_blocks or int(
            config.kv_cache_memory_gb * 2**30 // kv_block_bytes(model_cfg, config.block_size, self.kv_dtype)
        )
        if num_blocks < 1:
            raise ValueError("kv_cache_memory_gb is too small for a single KV-cache block")
        self.kv_capacity_tokens = num_blocks * config.block_size
        # NOTE: a sequence may never outgrow the whole pool, so preempting all others always lets
        # the oldest running sequence progress (no livelock).
        self.max_model_len = min(
            model_cfg.max_position_embeddings,
            config.max_model_len or model_cfg.max_position_embeddings,
            self.kv_capacity_tokens,
        )
        self.block_manager = BlockManager(num_blocks, config.block_size, config.enable_prefix_caching)
        self.scheduler = Scheduler(
            self.block_manager, config.max_num_seqs, config.max_num_batched_tokens, config.prefill_chunk_size
        )
        self.attention_backend = select_backend(config.attention_backend, config.device, model_cfg.head_dim)
        graphs = (
            config.device.type == "cuda" and not config.enforce_eager and self.attention_backend == "triton"
        )
        in_place = config.device.type == "cpu" and cpu_attention.load(config.cache_dir)
        log.info(
            "paged attention backend %s%s; decode %s",
            self.attention_backend,
            " (in place, C kernel)" if in_place else "",
            f"in CUDA graphs up to batch {config.max_num_seqs}" if graphs else "eager",
        )
        self.runner = ModelRunner(
            self.model,
            num_blocks,
            config.block_size,
            self.max_model_len,
            self.attention_backend,
            config.max_num_seqs if graphs else 0,
            self.kv_dtype,
        )
        proposer = build_proposer(config, self.vocab_size, self.max_model_len, num_blocks)
        self.spec = (
            SpeculativeDecoder(
                proposer,
                config.num_speculative_tokens,
                config.spec_max_batch,
                config.spec_max_tokens or (config.cpu_packed_rows if packed_bytes else None),
            )
            if proposer is not None
            else None
        )
        self._grammars: EngineGrammars | None = None  # built on the first constrained request
        self._grammars_lock = threading.Lock()
        self._seqs: dict[str, Sequence] = {}
        self._detok: dict[str, Detokenizer] = {}
        self._arrivals = 0
        self._totals = {"prompt": 0, "generation": 0, "cached": 0}
        log.info(
            "KV cache: %d blocks x %d tokens = %d tokens (%.2f GiB, %s); max_model_len %d; device %s, %s",
            num_blocks,
            config.block_size,
            self.kv_capacity_tokens,
            num_blocks * kv_block_bytes(model_cfg, config.block_size, self.kv_dtype) / 2**30,
            self.kv_dtype,
            self.max_model_len,
            config.device,
            config.dtype,
        )

    # -- requests ------------------------------------------------------------------------------------

    def validate(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams) -> None:
        """Raise InvalidRequestError if the request cannot be served. Prompts must leave room for at
        least one output token; `max_tokens` beyond the context is clamped (finish_reason "length")."""
        params.validate()
        if request_id in self._seqs:
            raise InvalidRequestError(f"request id {request_id!r} is already in use")
        if not prompt_token_ids:
            raise InvalidRequestError("the prompt is empty")
        if len(prompt_token_ids) >= self.max_model_len:
            raise InvalidRequestError(
                f"prompt has {len(prompt_token_ids)} tokens; this model's context is {self.max_model_len} "
                "(prompt plus at least one output token)"
            )
        if min(prompt_token_ids) < 0 or max(prompt_token_ids) >= self.vocab_size:
            raise InvalidRequestError(f"prompt token ids must be in [0, {self.vocab_size})")
        if params.structured_output is not None:
            # Compiling here (the caller's thread) reports a bad grammar before the request is queued
            # and leaves the compiled grammar in the service's cache for add_request.
            self.grammars().service.compile(params.structured_output)

    def grammars(self) -> EngineGrammars:
        """The structured-output state (see inference/grammar/README.md), created on first use so
        engines that never see a grammar do not pay for xgrammar's tokenizer tables."""
        with self._grammars_lock:
            if self._grammars is None:
                from inference.grammar import EngineGrammars, GrammarService

                service = GrammarService(
                    self.tokenizer, vocab_size=self.vocab_size, stop_token_ids=sorted(self.eos_token_ids)
                )
                self._grammars = EngineGrammars(service)
            return self._grammars

    def compiled(self, spec: StructuredOutputSpec) -> bool:
        """Whether `spec`'s grammar is built and cached (builds nothing, not even the service)."""
        with self._grammars_lock:
            grammars = self._grammars
        return grammars is not None and grammars.service.cached(spec)

    def add_request(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams) -> None:
        self.validate(request_id, prompt_token_ids, params)
        n = len(prompt_token_ids)
        seq = Sequence(
            request_id,
            list(prompt_token_ids),
            n,
            params,
            min(self.max_model_len, n + params.max_tokens),
        )
        self._arrivals += 1
        try:
            if params.seed is not None:
                seq.generator = torch.Generator(self.config.device).manual_seed(params.seed)
            if params.structured_output is not None:
                self.grammars().add(request_id, params.structured_output)
            self._detok[request_id] = Detokenizer(self.tokenizer, seq.token_ids, params.stop)
        except Exception:  # leave no half-added request behind
            self._forget(request_id)
            raise
        self._seqs[request_id] = seq
        self.scheduler.add(seq)

    def abort_request(self, request_id: str) -> RequestOutput | None:
        """Stop a request; returns its final output (finish_reason "abort"), or None if unknown."""
        seq = self._seqs.get(request_id)
        if seq is None:
            return None
        self.scheduler.finish(seq, "abort")
        return self._output(seq, [], None)

    def abort_all(self) -> list[RequestOutput]:
        return [out for rid in list(self._seqs) if (out := self.abort_request(rid)) is not None]

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    # -- the step ------------------------------------------------------------------------------------

    @torch.inference_mode()
    def step(self) -> list[RequestOutput]:
        proposals = None if self.spec is None else self.spec.propose(self.scheduler.running, self._grammars)
        batch = self.scheduler.schedule(proposals)
        if batch is None:
            return []
        try:
            return self._run(batch)
        except StepError as e:  # some requests failed on their own: only they end
            self._fail([s for s in batch.seqs if s.request_id in e.request_ids])
            raise
        except Exception as e:  # the batch as a whole failed (the forward pass, say)
            self._fail(batch.seqs)
            raise StepError([s.request_id for s in batch.seqs]) from e

    def _fail(self, seqs: list[Sequence]) -> None:
        for seq in seqs:
            if not seq.is_finished:
                self.scheduler.finish(seq, "abort")
            self._forget(seq.request_id)

    def _run(self, batch: ScheduledBatch) -> list[RequestOutput]:
        """Run the batch, turn each sampling sequence's logits into its new tokens, and let the
        scheduler apply them; a request whose sampling or post-processing raises fails alone
        (StepError with the others' outputs)."""
        logits = self.runner.run(batch)
        fed = dict(zip(batch.seqs, batch.num_new_tokens, strict=True))
        to_sample = [s for s, flag in zip(batch.seqs, batch.sampling, strict=True) if flag]
        plain, plain_rows, spec_rows = [], [], []
        row = 0
        for seq in to_sample:
            if seq.spec_token_ids:
                spec_rows.append((seq, row))
            else:
                plain.append(seq)
                plain_rows.append(row)
            row += 1 + len(seq.spec_token_ids)
        updates: dict[Sequence, SeqUpdate] = {}
        emitted: list[tuple[Sequence, list[int], list | None]] = []
        failed: dict[str, Exception] = {}
        if plain:
            logits_plain = logits[torch.tensor(plain_rows, device=logits.device)] if spec_rows else logits
            for seq, drawn in zip(plain, self._sample(logits_plain, plain), strict=True):
                try:
                    if isinstance(drawn, Exception):
                        raise drawn
                    token, logprob = drawn
                    updates[seq] = SeqUpdate([token], fed[seq], self._stop_reason(seq, [], token))
                    emitted.append((seq, [token], None if logprob is None else [logprob]))
                except Exception as e:
                    failed[seq.request_id] = e
        verified = []
        if spec_rows:
            verified = self.spec.verify_all(spec_rows, logits, self._grammars, self._stop_reason)
        for (seq, _), result in zip(spec_rows, verified, strict=True):
            if isinstance(result, Exception):
                failed[seq.request_id] = result
                continue
            updates[seq] = SeqUpdate(result.tokens, 1 + result.accepted, result.finish_reason)
            emitted.append((seq, result.tokens, None if result.logprobs[0] is None else result.logprobs))
        self.scheduler.update_from_output(batch, updates, set(failed))
        outputs = [self._output(seq, tokens, logprobs) for seq, tokens, logprobs in emitted]
        if failed:
            log.error("requests failed in a step: %s", {rid: repr(e) for rid, e in failed.items()})
            raise StepError(list(failed), outputs) from next(iter(failed.values()))
        return outputs

    def _sample(self, logits: torch.Tensor, seqs: list[Sequence]) -> list[tuple[int, Any] | Exception]:
        """(token, logprob) per sequence, sampled as one batch; if that raises, row by row, so that
        one request's bad state (its generator, its grammar) fails only that request."""
        original = logits.clone()  # sample() works in place
        try:
            bitmask = self._grammars.bitmask(seqs) if self._grammars else None
            out = sample(logits, seqs, bitmask)
            return list(zip(out.token_ids, out.logprobs, strict=True))
        except Exception:
            log.warning("batched sampling failed; sampling its %d rows one by one", len(seqs), exc_info=True)
        results: list[tuple[int, Any] | Exception] = []
        for i, seq in enumerate(seqs):
            try:
                bitmask = self._grammars.bitmask([seq]) if self._grammars else None
                out = sample(original[i : i + 1].clone(), [seq], bitmask)
                results.append((out.token_ids[0], out.logprobs[0]))
            except Exception as e:
                results.append(e)
        return results

    def _stop_reason(self, seq: Sequence, emitted: list[int], token: int) -> FinishReason | None:
        """Why `seq` stops at `token`, which follows `emitted` (its tokens earlier in this step, not
        yet applied), or None; advances the request's grammar and detokenizer by the token."""
        params = seq.params
        # NOTE: a grammar must see every sampled token (EOS included: accepting it terminates it).
        grammar_done = params.structured_output is not None and self._grammars.accept(seq.request_id, token)
        if token in params.stop_token_ids or (token in self.eos_token_ids and not params.ignore_eos):
            return "stop"  # the stop token's text is not part of the output
        if self._detok[seq.request_id].push(token) or grammar_done:
            return "stop"
        count = len(emitted) + 1
        if seq.num_output_tokens + count >= params.max_tokens or seq.num_tokens + count >= seq.max_len:
            return "length"
        return None

    def _output(self, seq: Sequence, new_ids: list[int], logprobs: list | None) -> RequestOutput:
        finished = seq.finish_reason is not None
        detok = self._detok[seq.request_id]
        if finished and not detok.stopped:
            detok.flush()
        text = detok.take(finished)
        if finished:
            self._forget(seq.request_id)
            self._totals["prompt"] += seq.num_prompt_tokens
            self._totals["generation"] += seq.num_output_tokens
            self._totals["cached"] += seq.num_cached_tokens or 0
        return RequestOutput(
            request_id=seq.request_id,
            new_token_ids=new_ids,
            new_text=text,
            finished=finished,
            finish_reason=seq.finish_reason,
            num_prompt_tokens=seq.num_prompt_tokens,
            num_output_tokens=seq.num_output_tokens,
            num_cached_tokens=seq.num_cached_tokens or 0,
            logprobs=logprobs,
            scheduled_at=seq.scheduled_at if finished else None,
        )

    def _forget(self, request_id: str) -> None:
        self._seqs.pop(request_id, None)
        self._detok.pop(request_id, None)
        if self.spec is not None:
            self.spec.forget(request_id)
        if self._grammars is not None:
            self._grammars.remove(request_id)

    # -- conveniences --------------------------------------------------------------------------------

    def stats(self) -> EngineStats:
        return EngineStats(
            num_running=len(self.scheduler.running),
            num_waiting=len(self.scheduler.waiting),
            kv_cache_usage=self.block_manager.usage,
            kv_cache_capacity_tokens=self.kv_capacity_tokens,
            num_preemptions_total=self.scheduler.num_preemptions_total,
            num_prompt_tokens_total=self._totals["prompt"],
            num_generation_tokens_total=self._totals["generation"],
            num_cached_tokens_total=self._totals["cached"],
            prefix_cache_queries_total=self.scheduler.prefix_cache_queries,
            prefix_cache_hits_total=self.scheduler.prefix_cache_hits,
            spec_num_drafts_total=self.spec.num_drafts if self.spec else 0,
            spec_proposed_tokens_total=self.spec.num_proposed if self.spec else 0,
            spec_accepted_tokens_total=self.spec.num_accepted if self.spec else 0,
            max_num_seqs=self.scheduler.max_num_seqs,
        )

    def generate(
        self, prompts: list[list[int]], params: SamplingParams | list[SamplingParams]
    ) -> list[tuple[list[int], str, str | None]]:
        """Run prompts to completion (offline use and tests): (token ids, text, finish_reason) each."""
        plist = params if isinstance(params, list) else [params] * len(prompts)
        ids = [f"offline-{self._arrivals + i}" for i in range(len(prompts))]
        for rid, prompt, p in zip(ids, prompts, plist, strict=True):
            self.add_request(rid, prompt, p)
        results: dict[str, tuple[list[int], list[str], str | None]] = {rid: ([], [], None) for rid in ids}
        while self.has_unfinished():
            for out in self.step():
                tokens, texts, _ = results[out.request_id]
                tokens.extend(out.new_token_ids)
                texts.append(out.new_text)
                results[out.request_id] = (tokens, texts, out.finish_reason)
        return [(results[r][0], "".join(results[r][1]), results[r][2]) for r in ids]
