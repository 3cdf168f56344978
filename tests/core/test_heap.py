import gc

from core.heap import GcPauses


def test_gc_pauses_times_each_pass_until_stopped():
    seen: list[tuple[int, float]] = []
    pauses = GcPauses(lambda gen, s: seen.append((gen, s))).start()
    gc.collect()
    assert (2, seen[-1][1]) == seen[-1] and seen[-1][1] >= 0
    pauses.stop()
    count = len(seen)
    gc.collect()
    assert len(seen) == count
    pauses.stop()  # a second stop is harmless (shutdown after a failed start-up)
