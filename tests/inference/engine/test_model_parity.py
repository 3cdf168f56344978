"""Our model's logits equal HF transformers' on the same weights (fp32), through every attention path."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from inference.engine import LLMEngine
from inference.model_runner import ScheduledBatch
from inference.protocol import SamplingParams
from inference.sequence import Sequence
from tests.inference.engine.tiny import save_tiny_model

LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32,
    "rope_theta": 500000.0,
}


def our_logits(engine: LLMEngine, ids: list[int], chunk: int) -> torch.Tensor:
    """Logits at every position, feeding the prompt `chunk` tokens per step through the paged cache."""
    seq = Sequence("parity", list(ids), len(ids), SamplingParams(), engine.max_model_len)
    assert engine.block_manager.allocate(seq, len(ids))
    runner, out = engine.runner, []
    with torch.inference_mode():
        while seq.num_computed_tokens < len(ids):
            n = min(chunk, len(ids) - seq.num_computed_tokens)
            input_ids, positions, meta = runner.prepare(ScheduledBatch([seq], [n], [True]))
            hidden = engine.model(input_ids, runner.rope.lookup(positions), runner.kv_caches, meta)
            out.append(engine.model.compute_logits(hidden))
            seq.num_computed_tokens += n
    engine.block_manager.free(seq)
    return torch.cat(out)


def hf_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("family", "overrides"),
    [
        ("llama", {}),
        ("llama", {"tie_word_embeddings": True, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
        ("llama", {"rope_scaling": LLAMA3_ROPE, "head_dim": 32}),
        ("qwen2", {}),
    ],
    ids=["llama", "llama-tied-linear-rope", "llama3-rope-head-dim", "qwen2-bias"],
)
@pytest.mark.parametrize("chunk", [1000, 7, 3, 1], ids=["prefill", "chunked", "verify-rows", "decode"])
def test_tiny_logits_match_transformers(tmp_path, make_engine, family, overrides, chunk):
    directory = save_tiny_model(tmp_path, family, **overrides)
    hf = AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32).eval()
    ids = torch.randint(0, hf.config.vocab_size, (70,), generator=torch.Generator().manual_seed(1)).tolist()
    engine = make_engine(directory)
    torch.testing.assert_close(our_logits(engine, ids, chunk), hf_logits(hf, ids), atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_smollm2_gguf_logits_match_transformers(smollm2_engine, smollm2_path):
    hf = AutoModelForCausalLM.from_pretrained(
        str(smollm2_path.parent), gguf_file=smollm2_path.name, dtype=torch.float32
    ).eval()
    ids = smollm2_engine.tokenizer.encode("The capital of France is Paris, and the capital of Italy is")
    ours = our_logits(smollm2_engine, ids, chunk=5)
    torch.testing.assert_close(ours, hf_logits(hf, ids), atol=1e-4, rtol=1e-4)
    assert smollm2_engine.tokenizer.decode(int(ours[-1].argmax())).strip() == "Rome"
