"""Requests end for the right reason, with the right text."""

from __future__ import annotations

import pytest

from inference.protocol import SamplingParams

PROMPT = [10, 11, 12, 13, 14]


def run(engine, params: SamplingParams):
    engine.add_request("r", PROMPT, params)
    outputs = []
    while engine.has_unfinished():
        outputs += engine.step()
    return outputs


@pytest.mark.unit
def test_max_tokens_finishes_with_length(tiny_llama, make_engine):
    outputs = run(make_engine(tiny_llama), SamplingParams(max_tokens=7, temperature=0.0, ignore_eos=True))
    assert len(outputs) == 7 and outputs[-1].finished and outputs[-1].finish_reason == "length"
    assert outputs[-1].num_output_tokens == 7 and outputs[-1].num_prompt_tokens == len(PROMPT)
    assert not any(o.finished for o in outputs[:-1])


@pytest.mark.unit
def test_context_clamps_max_tokens(tiny_llama, make_engine):
    engine = make_engine(tiny_llama, max_model_len=12)
    outputs = run(engine, SamplingParams(max_tokens=100, temperature=0.0, ignore_eos=True))
    assert outputs[-1].finish_reason == "length" and outputs[-1].num_output_tokens == 12 - len(PROMPT)


@pytest.mark.unit
def test_stop_string_is_trimmed_and_never_streamed(tiny_llama, make_engine):
    engine = make_engine(tiny_llama)
    greedy = SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)
    full = "".join(o.new_text for o in run(engine, greedy))
    assert len(full) > 20, full
    stop = full[12:15]
    outputs = run(
        engine, SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True, stop=["\x00never", stop])
    )
    streamed = "".join(o.new_text for o in outputs)
    assert streamed == full[: full.find(stop)]
    assert outputs[-1].finish_reason == "stop"
    assert all(stop not in o.new_text for o in outputs)


@pytest.mark.unit
def test_stop_token_id_ends_without_its_text(tiny_llama, make_engine):
    engine = make_engine(tiny_llama)
    greedy = SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True)
    tokens = [t for o in run(engine, greedy) for t in o.new_token_ids]
    stop_id = tokens[4]
    outputs = run(
        engine, SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True, stop_token_ids=[stop_id])
    )
    produced = [t for o in outputs for t in o.new_token_ids]
    assert produced == tokens[: tokens.index(stop_id) + 1]
    assert outputs[-1].finish_reason == "stop"
    assert "".join(o.new_text for o in outputs) == engine.tokenizer.decode(produced[:-1])


@pytest.mark.unit
def test_streamed_text_equals_decoded_tokens(tiny_llama, make_engine):
    engine = make_engine(tiny_llama)
    outputs = run(engine, SamplingParams(max_tokens=60, temperature=1.0, seed=3, ignore_eos=True))
    produced = [t for o in outputs for t in o.new_token_ids]
    assert "".join(o.new_text for o in outputs) == engine.tokenizer.decode(produced, skip_special_tokens=True)


@pytest.mark.slow
def test_smollm2_stops_at_eos_and_on_stop_string(smollm2_engine):
    tok = smollm2_engine.tokenizer
    text = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    prompt = tok.encode(text)
    [(tokens, answer, reason)] = smollm2_engine.generate(
        [prompt], SamplingParams(max_tokens=64, temperature=0.0)
    )
    assert reason == "stop" and tokens[-1] in smollm2_engine.eos_token_ids and "Paris" in answer
    [(_, cut, reason)] = smollm2_engine.generate(
        [prompt], SamplingParams(max_tokens=64, temperature=0, stop=["Paris"])
    )
    assert reason == "stop" and cut == answer[: answer.index("Paris")]


@pytest.mark.unit
def test_grammar_constrains_output_and_stops(tiny_llama, make_engine):
    from inference.grammar import parse_structured_output

    engine = make_engine(tiny_llama)
    spec = parse_structured_output({"structured_outputs": {"choice": ["quick fox", "lazy dog"]}})
    for seed in range(3):
        outputs = run(
            engine, SamplingParams(max_tokens=30, temperature=1.0, seed=seed, structured_output=spec)
        )
        assert "".join(o.new_text for o in outputs) in ("quick fox", "lazy dog")
        assert outputs[-1].finish_reason == "stop"
    assert not engine.grammars()._grammars  # released with their requests
