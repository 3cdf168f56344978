import gc


def _full_passes(client) -> float:
    prefix = 'groundwork_gc_pause_seconds_count{generation="2"} '
    lines = [line for line in client.get("/metrics").text.splitlines() if line.startswith(prefix)]
    return float(lines[0].split()[-1]) if lines else 0.0


def test_metrics_count_the_api_processs_full_collections(client):
    before = _full_passes(client)
    gc.collect()
    assert _full_passes(client) >= before + 1
