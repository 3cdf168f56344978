"""`benchmarks.agents`: a run that skips a part keeps that part of the earlier results file."""

from __future__ import annotations

import json

import pytest

from benchmarks.agents import carry_over

pytestmark = pytest.mark.unit


def test_skipped_parts_come_from_the_earlier_file_with_their_machine(tmp_path):
    out = tmp_path / "agents.json"
    assert carry_over({"tasks": 2}, out) == {"tasks": 2}  # no earlier file
    out.write_text(json.dumps({"machine": "old", "bfcl": 1, "tasks": 1}))
    first = carry_over({"machine": "new", "tasks": 2}, out)
    assert first == {"machine": "new", "tasks": 2, "bfcl": 1, "carried_over": {"bfcl": "old"}}
    out.write_text(json.dumps(first))
    # carried twice, a part still names the machine it was measured on; a re-measured part replaces it
    assert carry_over({"machine": "newer", "tasks": 3}, out)["carried_over"] == {"bfcl": "old"}
    assert carry_over({"machine": "newer", "bfcl": 4, "tasks": 3}, out) == {
        "machine": "newer",
        "bfcl": 4,
        "tasks": 3,
    }
