"""The platform as an MCP server, through the SDK's own clients: Streamable HTTP against the API
served by uvicorn (auth required, real keys), and `groundwork mcp serve --stdio` as a subprocess.
The corpus is ingested by the real worker; `ask` answers with the packaged SmolLM2."""

from __future__ import annotations

import os
import sys
import uuid

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from api.main import create_app
from tests.api.qa_corpus import QUESTION
from tests.support.http import running
from tests.support.mcp_client import error_text, http_client, make_key, payload

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]
TOOLS = {
    "search",
    "ask",
    "list_collections",
    "read_document",
    "start_agent_run",
    "get_agent_run",
    "submit_tool_outputs",
}


@pytest.fixture(scope="module")
def strict(broker_settings):
    return broker_settings.model_copy(update={"auth_required": True})


@pytest.fixture(scope="module")
def base(strict, qa_collection):
    """The API as in production: its own app, start-up and event loop, on a loopback port."""
    with running(create_app(strict), lifespan="on") as url:
        yield url


@pytest.fixture(scope="module")
def keys(session_factory) -> dict[str, str]:
    """default: the tenant owning `qa-docs`; reader: its read-only key; other: another tenant."""
    return {
        "default": make_key(session_factory, "default"),
        "reader": make_key(session_factory, "default", ["read"]),
        "other": make_key(session_factory, f"mcp-other-{uuid.uuid4().hex[:6]}"),
    }


async def _search_and_ask(client) -> None:
    """What both transports must do alike: list the tools, search, page, read, ask with citations."""
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == TOOLS
    search = listed["search"].input_schema
    assert search["required"] == ["collections", "query"] and search["additionalProperties"] is False
    assert search["properties"]["k"]["maximum"] == 50 and search["properties"]["query"]["maxLength"] == 2000

    names = [c["name"] for c in payload(await client.call_tool("list_collections", {}))["collections"]]
    assert "qa-docs" in names
    found = payload(await client.call_tool("search", {"collections": ["qa-docs"], "query": QUESTION, "k": 2}))
    top = found["results"][0]
    assert top["source_id"] == "zephyr-release.txt" and top["char_end"] > top["char_start"] >= 0, top
    assert uuid.UUID(top["chunk_id"]) and top["title"] and top["score"] > 0
    assert found["next_offset"] == 2
    page2 = payload(
        await client.call_tool("search", {"collections": ["qa-docs"], "query": QUESTION, "k": 2, "offset": 2})
    )
    assert {r["chunk_id"] for r in page2["results"]}.isdisjoint(r["chunk_id"] for r in found["results"])

    span = payload(
        await client.call_tool("read_document", {"document_id": top["document_id"], "start": 0, "length": 25})
    )
    assert span["text"] == "Zephyr 4.2 release notes." and span["next_start"] == 25, span

    answer = payload(await client.call_tool("ask", {"question": QUESTION, "collections": ["qa-docs"]}))
    assert "12 March 2026" in answer["answer"], answer
    assert answer["citations"] and answer["citations"][0]["source_id"] == "zephyr-release.txt", answer
    assert answer["grounded"] is True and "claims" in answer


def test_http_client_with_a_key_searches_reads_and_asks(base, keys):
    async def main():
        async with http_client(base, keys["default"]) as client:
            await _search_and_ask(client)
            resources = (await client.list_resources()).resources
            qa = next(r for r in resources if r.name == "qa-docs")
            body = (await client.read_resource(qa.uri)).contents[0].text
            assert "zephyr-release.txt" in body

    anyio.run(main)


def test_without_a_key_or_with_another_tenants_key_nothing_of_the_tenant_is_seen(base, keys):
    refused = httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    bad = httpx.post(f"{base}/mcp", headers={"authorization": "Bearer gw_nope"}, json={})
    assert bad.status_code == 401

    async def main():
        with pytest.raises(Exception):  # noqa: B017 - the SDK raises its transport's error
            async with http_client(base, None) as client:
                await client.list_tools()
        async with http_client(base, keys["default"]) as mine:
            hit = payload(await mine.call_tool("search", {"collections": ["qa-docs"], "query": QUESTION}))
            document = hit["results"][0]["document_id"]
        async with http_client(base, keys["other"]) as other:
            assert payload(await other.call_tool("list_collections", {}))["collections"] == []
            missing = error_text(
                await other.call_tool("search", {"collections": ["qa-docs"], "query": QUESTION})
            )
            assert missing.startswith("collection_not_found"), missing
            read = error_text(await other.call_tool("read_document", {"document_id": document}))
            assert read.startswith("document_not_found"), read
            asked = error_text(
                await other.call_tool("ask", {"question": QUESTION, "collections": ["qa-docs"]})
            )
            assert asked.startswith("collection_not_found"), asked
            assert (await other.list_resources()).resources == []

    anyio.run(main)


def test_read_only_key_reads_but_cannot_start_runs(base, keys):
    async def main():
        async with http_client(base, keys["reader"]) as client:
            assert payload(await client.call_tool("list_collections", {}))["total"] >= 1
            refused = error_text(await client.call_tool("start_agent_run", {"input": "Say hi."}))
            assert refused.startswith("insufficient_scope") and "'write'" in refused, refused
            outputs = {"run_id": str(uuid.uuid4()), "tool_outputs": [{"tool_call_id": "c", "output": "x"}]}
            refused = error_text(await client.call_tool("submit_tool_outputs", outputs))
            assert refused.startswith("insufficient_scope"), refused

    anyio.run(main)


def test_malformed_arguments_are_tool_errors_that_say_what_is_wrong(base, keys):
    async def main():
        async with http_client(base, keys["default"]) as client:
            missing = error_text(await client.call_tool("search", {"collections": ["qa-docs"]}))
            assert missing.startswith("invalid_arguments") and "query: Field required" in missing, missing
            too_many = error_text(
                await client.call_tool("search", {"collections": ["qa-docs"], "query": "x", "k": 51})
            )
            assert "k: Input should be less than or equal to 50" in too_many, too_many
            extra = error_text(await client.call_tool("list_collections", {"limt": 5}))
            assert "limt: Extra inputs are not permitted" in extra, extra
            not_id = error_text(await client.call_tool("read_document", {"document_id": "12"}))
            assert "document_id" in not_id, not_id
            unknown = error_text(await client.call_tool("drop_tables", {}))
            assert unknown.startswith("unknown_tool"), unknown

    anyio.run(main)


def test_stdio_server_through_the_sdks_stdio_client(strict, keys, qa_collection):
    env = {
        **os.environ,
        "PYTHONPATH": os.getcwd(),
        "GROUNDWORK_DATABASE_URL": strict.database_url,
        "GROUNDWORK_DATA_DIR": str(strict.data_dir),
        "GROUNDWORK_MODEL_CACHE_DIR": str(strict.model_cache_dir),
        "GROUNDWORK_AUTH_REQUIRED": "true",
        "GROUNDWORK_BROKER_URL": strict.broker_url,
        "GROUNDWORK_RESULT_BACKEND": strict.result_backend,
        "GROUNDWORK_CELERY_QUEUE": strict.celery_queue,
        "GROUNDWORK_API_KEY": keys["default"],
    }
    command = [sys.executable, "-m", "cli.main", "mcp", "serve", "--stdio"]

    async def main():
        async with Client(StdioServerParameters(command=command[0], args=command[1:], env=env)) as client:
            await _search_and_ask(client)
        refused = StdioServerParameters(
            command=command[0], args=command[1:], env={**env, "GROUNDWORK_API_KEY": "gw_no"}
        )
        with pytest.raises(Exception):  # noqa: B017 - the process exits before the handshake
            async with Client(refused) as client:
                await client.list_tools()

    anyio.run(main)
