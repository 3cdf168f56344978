"""Agents using tools from real MCP servers installed from PyPI (`mcp-server-time`, and
`mcp-server-git` on a repository made here), run by the packaged SmolLM2 under the grammar built
from the servers' own input schemas; and a server that dies mid-run, which the run survives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import jsonschema
import pytest
from fastapi.testclient import TestClient
from mcp import Client, StdioServerParameters

from api.main import create_app
from core.settings.mcp import McpSettings

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]
COMMIT = "Add the QX-7 humidity sensor driver"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("repo")
    run = lambda *a: subprocess.run(["git", *a], cwd=path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("config", "user.email", "dev@example.com")
    run("config", "user.name", "Dev")
    (path / "sensor.txt").write_text("QX-7 driver\n")
    run("add", "sensor.txt")
    run("commit", "-q", "-m", COMMIT)
    return path


@pytest.fixture(scope="module")
def servers(repo) -> McpSettings:
    py = sys.executable
    return McpSettings(
        servers=[
            {"name": "time", "command": py, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
            {
                "name": "git",
                "command": py,
                "args": ["-m", "mcp_server_git", "--repository", str(repo)],
                "tools": ["git_log"],  # the operator offers a read-only tool only
                "arguments": {"repo_path": str(repo)},  # ...of the one repository it serves
            },
            {"name": "crashy", "command": py, "args": ["-m", "tests.support.crashing_mcp_server"]},
            {"name": "missing", "command": "/nonexistent/mcp-server"},
            {
                "name": "elsewhere",
                "command": py,
                "args": ["-m", "tests.support.crashing_mcp_server"],
                "tenants": ["another-tenant"],
            },
        ],
        call_timeout_s=20,
        connect_timeout_s=30,
    )


@pytest.fixture(scope="module")
def api(broker_settings, servers):
    with TestClient(create_app(broker_settings.model_copy(update={"mcp": servers}))) as client:
        yield client


def _server_schemas(config) -> dict[str, dict]:
    """The tools' inputSchemas as the server itself lists them (the SDK's stdio client)."""

    async def main():
        params = StdioServerParameters(command=config.command, args=config.args)
        async with Client(params) as client:
            return {t.name: t.input_schema for t in (await client.list_tools()).tools}

    return anyio.run(main)


def _run(api, **body) -> dict:
    resp = api.post("/v1/agents/runs", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


def _mcp_calls(run: dict, prefix: str) -> list[dict]:
    return [
        c for s in run["trace"] if s["type"] == "llm" for c in s["tool_calls"] if c["name"].startswith(prefix)
    ]


def _results(run: dict, prefix: str) -> list[str]:
    return [s["output"] for s in run["trace"] if s["type"] == "tool_result" and s["name"].startswith(prefix)]


def test_agent_calls_the_time_server_with_a_schema_valid_call_and_cites_it(api, servers):
    schema = _server_schemas(servers.server("time"))["get_current_time"]
    task = "What is the current time in Europe/Paris?"
    run = _run(api, agent="react", input=task, mcp_servers=["time"])
    assert run["status"] == "completed" and run["mcp_servers"] == ["time"], run
    [call, *_] = _mcp_calls(run, "time_")
    assert call["error"] is None and call["name"] == "time_get_current_time", call
    jsonschema.validate(call["arguments"], schema)  # valid for the server's own schema
    [output, *_] = _results(run, "time_")
    assert "untrusted" in output and '"datetime"' in output, output
    assert run["finish_reason"] == "answered", run
    cited = [c for c in run["citations"] if c["source_id"] == "mcp://time/get_current_time"]
    day = output.split('"datetime": "')[1][:10]
    assert cited or day in run["answer"], (run["answer"], run["citations"])


def test_agent_reads_the_git_log_of_a_local_repository(api, servers, repo):
    schema = _server_schemas(servers.server("git"))["git_log"]
    task = "What is the message of the latest commit in the git repository?"
    run = _run(api, agent="react", input=task, mcp_servers=["git"])
    calls = _mcp_calls(run, "git_")
    assert calls and {c["name"] for c in calls} == {"git_git_log"}, run["trace"]  # only the allowed tool
    for call in calls:
        assert call["error"] is None and "repo_path" not in call["arguments"]  # pinned, not shown
        jsonschema.validate({**call["arguments"], "repo_path": str(repo)}, schema)
    outputs = _results(run, "git_")
    # NOTE: the 135M model sometimes fills git_log's optional date filters with dates that leave the
    # commit out; the server then answers with an empty history, which is the server being right.
    filtered = any({"start_timestamp", "end_timestamp"} & set(c["arguments"]) for c in calls)
    assert filtered or any(COMMIT in o for o in outputs), (calls, outputs)
    assert all(o.startswith("[") and "untrusted" in o for o in outputs), outputs
    if any(COMMIT in o for o in outputs):
        assert run["finish_reason"] == "answered", run
        cited = [c for c in run["citations"] if c["source_id"] == "mcp://git/git_log"]
        assert cited or "QX-7" in run["answer"], (run["answer"], run["citations"])


def test_a_server_dying_mid_run_or_not_starting_is_an_observation(api):
    run = _run(
        api,
        agent="rewoo",
        input="Which plan does the customer Ada Lane have?",
        mcp_servers=["crashy", "missing"],
    )
    assert run["status"] == "completed", (run["detail"], run["trace"])
    [unavailable] = [s for s in run["trace"] if s["type"] == "mcp_unavailable"]
    assert unavailable["server"] == "missing"
    outputs = _results(run, "crashy_")
    assert outputs and outputs[0].startswith("Error: MCP server 'crashy'"), outputs


def test_only_allowlisted_servers_of_the_tenant_can_be_named(api):
    for name in ("nope", "elsewhere"):
        refused = api.post("/v1/agents/runs", json={"input": "hi", "mcp_servers": [name]})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "mcp_server_not_allowed"
        assert "elsewhere" not in refused.json()["error"]["message"].split("allowed:")[1]


def test_admin_overview_lists_the_endpoint_and_the_tenants_servers_with_their_tools(api):
    body = api.get("/v1/mcp").json()
    assert body["endpoint"] == "/mcp" and {t["name"] for t in body["tools"]} >= {"search", "ask"}
    servers = {s["name"]: s for s in body["servers"]}
    assert set(servers) == {"time", "git", "crashy", "missing"}  # not the other tenant's
    assert [t["name"] for t in servers["git"]["tools"]] == ["git_log"]
    assert "get_current_time" in {t["name"] for t in servers["time"]["tools"]}
    assert servers["missing"]["error"] and not servers["missing"]["tools"]


def test_a_rewoo_run_left_with_no_tools_still_answers(api):
    # Its one MCP server cannot start and no built-ins were asked for: nothing to plan with.
    run = _run(api, agent="rewoo", input="Say hello to the team.", mcp_servers=["missing"])
    assert run["status"] == "completed" and run["finish_reason"] == "answered", (run["detail"], run["trace"])
    assert [s["server"] for s in run["trace"] if s["type"] == "mcp_unavailable"] == ["missing"]
    [plan] = [s for s in run["trace"] if s["type"] == "plan"]
    assert plan["plan"] == [] and "no tools" in plan["note"], plan
    assert run["usage"]["llm_calls"] == 1 and run["usage"].get("tool_calls", 0) == 0, run["usage"]


def test_a_replacement_plan_may_name_the_runs_mcp_tools_but_no_unknown_tool(api):
    run = _run(api, agent="rewoo", input="What time is it in Tokyo?", mcp_servers=["time"], review_plan=True)
    assert run["status"] == "requires_action" and run["required_action"]["type"] == "review_plan", run
    bad = api.post(f"/v1/agents/runs/{run['id']}/plan", json={"plan": [{"tool": "rm", "input": "-rf"}]})
    error = bad.json()["error"]
    assert bad.status_code == 422 and error["code"] == "invalid_plan", bad.text
    assert "'rm'" in error["message"] and "time_get_current_time" in error["message"], error
    edited = [{"tool": "time_get_current_time", "input": "Asia/Tokyo"}]
    done = api.post(f"/v1/agents/runs/{run['id']}/plan", json={"plan": edited})
    assert done.status_code == 200, done.text
    done = done.json()
    assert done["status"] == "completed" and done["plan"][0]["tool"] == "time_get_current_time", done
    [output] = _results(done, "time_")
    assert "Asia/Tokyo" in output and '"datetime"' in output, output


def test_the_start_form_catalog_names_the_servers_and_a_run_still_starting_one_can_be_cancelled(
    broker_settings,
):
    # Never answers (and exits when its stdin closes): a run is still starting it when cancelled.
    mute = {"name": "mute", "command": sys.executable, "args": ["-c", "import sys; sys.stdin.read()"]}
    knobs = McpSettings(servers=[mute], connect_timeout_s=60)
    with TestClient(create_app(broker_settings.model_copy(update={"mcp": knobs}))) as api:
        assert api.get("/v1/agents/tools").json()["mcp_servers"] == ["mute"]
        body = {"input": "hi", "mcp_servers": ["mute"], "background": True}
        started = api.post("/v1/agents/runs", json=body)
        assert started.status_code == 202, started.text
        cancelled = api.post(f"/v1/agents/runs/{started.json()['id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        run = cancelled.json()
    assert run["finish_reason"] == "cancelled" and run["finished_at"], run  # not left "queued"
