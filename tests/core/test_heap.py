import gc

from core.heap import GcPauses


def test_gc_pauses_times_each_pass_until_stopped():
    seen: list[tuple[int, float]] = []
    pauses = GcPauses(lambda gen, s: seen.append((gen, s))).start()
    gc.collect()
    generation, seconds = seen[-1]
    assert generation == 2 and seconds >= 0
    pauses.stop()
    count = len(seen)
    gc.collect()
    assert len(seen) == count
    pauses.stop()  # a second stop is harmless (shutdown after a failed start-up)
