"""Agent evaluations through the API and the real worker (packaged model, in-process engine): a
BFCL-format dataset, one tool-call turn per case, metrics consistent with the stored calls."""

from __future__ import annotations

import json

import pytest

from evals.bfcl import ast_match
from tests.api.test_evals import create_run, upload_dataset, wait_run

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WEATHER = {
    "name": "weather.get_current",
    "description": "Current weather of a city.",
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
}
PARIS = [{"weather.get_current": {"city": ["Paris"], "unit": ["", "celsius"]}}]
OSLO = [{"weather.get_current": {"city": ["Oslo"], "unit": ["fahrenheit"]}}]
CASES = {
    "live_simple": [
        ("w1", "What is the weather in Paris right now?", PARIS),
        ("w2", "How warm is it in Oslo, in fahrenheit?", OSLO),
    ],
    "irrelevance": [("i1", "Write a haiku about the sea.", None)],
}


def bfcl_files() -> list:
    files = []
    for category, cases in CASES.items():
        lines = [
            {"id": key, "question": [[{"role": "user", "content": text}]], "function": [WEATHER]}
            for key, text, _ in cases
        ]
        files.append(("files", (f"BFCL_v4_{category}.json", "\n".join(map(json.dumps, lines)).encode())))
        gold = [{"id": key, "ground_truth": truth} for key, _, truth in cases if truth]
        if gold:
            body = "\n".join(map(json.dumps, gold)).encode()
            files.append(("files", (f"possible_answer/BFCL_v4_{category}.json", body)))
    return files


def test_bfcl_ast_rules():
    def one(name, arguments, gold=PARIS):
        return ast_match([(name, arguments)], gold)

    assert one("weather_get_current", {"city": "paris"})  # names made safe; case-blind
    assert one("weather_get_current", {"city": "Paris", "unit": "celsius"})
    assert not one("weather_get_current", {"city": "Paris", "unit": "fahrenheit"})
    assert not one("weather_get_current", {"unit": "celsius"})  # required city missing
    assert not one("weather_get_current", {"city": "Paris", "extra": 1})
    assert not one("other", {"city": "Paris"})
    assert not ast_match([], PARIS) and not ast_match([("weather_get_current", {"city": "Paris"})], None)


def test_bfcl_parallel_calls_match_the_gold_calls_in_any_order():
    both = PARIS + OSLO
    paris = ("weather_get_current", {"city": "Paris"})
    oslo = ("weather_get_current", {"city": "Oslo", "unit": "fahrenheit"})
    assert ast_match([paris, oslo], both) and ast_match([oslo, paris], both)
    assert not ast_match([paris], both)  # one call short
    assert not ast_match([paris, paris], both)  # each gold call is matched once
    assert not ast_match([paris, oslo, paris], both)


def test_agent_run_scores_tool_calls_on_bfcl(client, celery_worker):
    path = upload_dataset(client, bfcl_files())
    missing = client.post("/v1/evals", json={"kind": "agent", "dataset": {"path": path, "format": "bfcl"}})
    assert missing.status_code == 422 and "live_simple" in missing.json()["error"]["message"]  # no "test"
    sweep = {"kind": "agent", "dataset": {"path": path, "format": "bfcl", "split": "live_simple"}}
    refused = client.post("/v1/evals", json={**sweep, "sweep": {"fusion.alpha": [0.5, 0.8]}})
    assert refused.status_code == 422

    for category, cases in CASES.items():
        body = {"kind": "agent", "dataset": {"path": path, "format": "bfcl", "split": category}}
        run = wait_run(client, create_run(client, **body)["id"], timeout=600)
        assert run["status"] == "succeeded", run["error"]
        items = {i["item_key"]: i for i in client.get(f"/v1/evals/{run['id']}/items").json()}
        assert set(items) == {key for key, _, _ in cases}
        for key, _, gold in cases:
            item = items[key]
            calls = [c for c in item["output"]["calls"] if c["name"] != "final_answer"]
            metrics = item["metrics"]
            assert item["tokens"] > 0 and metrics["steps"] == 1
            # The engine constrains every call by its schema: whatever the model chose is valid.
            assert all(c["error"] is None for c in item["output"]["calls"]), item["output"]
            assert metrics["called"] == float(bool(calls))
            if gold:
                expected = ast_match([(c["name"], c["arguments"]) for c in calls], gold)
                assert metrics["ast_accuracy"] == metrics["success"] == float(expected)
                assert metrics["irrelevance_accuracy"] is None
            else:
                assert metrics["irrelevance_accuracy"] == metrics["success"] == float(not calls)
                assert metrics["ast_accuracy"] is None
        assert 0 <= run["metrics"]["success"] <= 1 and run["metrics"]["tokens_total"] > 0
