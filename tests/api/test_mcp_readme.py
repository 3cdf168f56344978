"""The design note lists every MCP tool with its exact input schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from api.mcp.server import input_schema, tool_list
from api.mcp.tools import TOOLS

README = Path(__file__).parents[2] / "api" / "mcp" / "README.md"


def test_the_readme_lists_every_tool_with_the_schema_it_is_served_with():
    text = README.read_text()
    for tool in tool_list():
        line = f"- `{tool.name}`: `{json.dumps(tool.input_schema, separators=(',', ':'))}`"
        assert line in text, f"api/mcp/README.md lacks (or has an old) schema of {tool.name}"


def test_the_sdk_finds_each_schema_by_name_and_none_for_an_unknown_tool():
    assert input_schema("search")["required"] == ["collections", "query"]
    assert input_schema("no_such_tool") is None


def test_a_tool_output_with_an_unknown_key_is_refused():
    args = {"run_id": "00000000-0000-0000-0000-000000000001"}
    ok = {"tool_call_id": "call_1", "output": "done"}
    assert TOOLS["submit_tool_outputs"].args.model_validate({**args, "tool_outputs": [ok]})
    with pytest.raises(ValidationError, match="extra"):
        TOOLS["submit_tool_outputs"].args.model_validate({**args, "tool_outputs": [{**ok, "outptu": "x"}]})
