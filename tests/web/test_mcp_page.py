"""The MCP panel in the browser: the endpoint and how to connect a host, and a configured MCP
server (the real `mcp-server-time`, started by the platform) with its tools."""

import sys

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
