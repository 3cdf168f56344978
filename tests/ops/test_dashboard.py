"""The Grafana dashboard validates against its schema (ops/grafana/dashboard.schema.json), its panels
tile the grid without overlapping, and every query is PromQL that Prometheus's own parser accepts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import jsonschema
import pytest
import yaml

from tests.support.services import ROOT

GRAFANA = ROOT / "ops" / "grafana"


def _dashboard() -> dict:
    return json.loads((GRAFANA / "groundwork.json").read_text())


def test_dashboard_matches_the_schema_and_tiles_the_grid():
    dashboard = _dashboard()
    schema = json.loads((GRAFANA / "dashboard.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(dashboard, schema)
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids repeat"
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, f"{p['title']} runs off the 24-column grid"
        for cell in ((x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])):
            assert cell not in cells, f"{p['title']} overlaps {cells[cell]}"
            cells[cell] = p["title"]
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for p in panels:
        for t in p.get("targets", []):
            assert set(re.findall(r"\$\{?(\w+)", t["expr"])) <= variables, t["expr"]


def test_a_schema_violation_is_caught():
    broken = _dashboard()
    broken["panels"][1]["gridPos"]["w"] = 30
    del broken["panels"][2]["targets"]
    schema = json.loads((GRAFANA / "dashboard.schema.json").read_text())
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(broken))
    assert len(errors) == 2, [e.message for e in errors]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool: apt-get install -y prometheus")
def test_every_panel_query_parses_as_promql(tmp_path):
    exprs = [t["expr"] for p in _dashboard()["panels"] for t in p.get("targets", [])]
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{i}", "expr": e.replace("$job", "groundwork")}
                    for i, e in enumerate(exprs)
                ],
            }
        ]
    }
    (tmp_path / "queries.yml").write_text(yaml.safe_dump(rules))
    result = subprocess.run(
        ["promtool", "check", "rules", str(tmp_path / "queries.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
