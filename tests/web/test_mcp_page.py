"""The MCP panel in the browser: the endpoint and how to connect a host, and a configured MCP
server (the real `mcp-server-time`, started by the platform) with its tools; the agent start form
gives a run that server."""

import re
import sys

import httpx
import pytest

from core.settings.mcp import McpSettings
from tests.web.conftest import SKIP_NO_PLAYWRIGHT, _serve, shot

expect = pytest.importorskip("playwright.sync_api", reason=SKIP_NO_PLAYWRIGHT).expect
pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def mcp_ui_url(broker_settings):
    time_server = {"name": "time", "command": sys.executable, "args": ["-m", "mcp_server_time"]}
    yield from _serve(broker_settings.model_copy(update={"mcp": McpSettings(servers=[time_server])}))


def test_mcp_panel_shows_the_endpoint_and_the_servers_tools(page, mcp_ui_url):
    page.goto(f"{mcp_ui_url}/ui/#/mcp")
    expect(page.get_by_role("heading", name="MCP", exact=True)).to_be_visible()
    expect(page.locator("#mcp-url")).to_have_text(f"{mcp_ui_url}/mcp")
    expect(page.locator("#mcp-tools")).to_contain_text("read_document")
    expect(page.locator("pre").first).to_contain_text("Bearer <your API key>")
    expect(page.locator("#mcp-server-time")).to_contain_text("get_current_time")
    shot(page, "mcp-panel")


def test_the_agent_start_form_gives_a_run_an_allowlisted_mcp_server(page, mcp_ui_url):
    """The form lists the tenant's allowlisted servers; the one picked is the run's, shown on its page."""
    page.goto(f"{mcp_ui_url}/ui/#/agents")
    box = page.locator("#agent-mcp").get_by_label("time")
    expect(box).not_to_be_checked()
    box.check()
    for builtin in page.locator("#agent-tools input[type=checkbox]").all():
        builtin.uncheck()  # only the server's tools
    page.get_by_label("Task", exact=True).fill("What time is it in Tokyo?")
    shot(page, "agent-form-mcp")
    page.get_by_role("button", name="Start run").click()
    expect(page).to_have_url(re.compile(r"#/agent/[0-9a-f-]{36}$"), timeout=60_000)
    run_url = f"{mcp_ui_url}/v1/agents/runs/{page.url.rsplit('/', 1)[1]}"
    run = httpx.get(run_url, timeout=30).json()
    assert run["mcp_servers"] == ["time"] and run["tools"] == [], run
    summary = page.locator("#run-summary")
    expect(summary.locator("div", has_text="MCP servers")).to_contain_text("time")
    # The model need not run to the end here (409: it already ended).
    assert httpx.post(f"{run_url}/cancel", timeout=30).status_code in (200, 409)
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0, timeout=30_000)
