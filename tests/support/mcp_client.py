"""MCP test helpers: keys per tenant and the SDK's own client over Streamable HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from core.database import session_scope
from core.tenancy import create_api_key, get_or_create_tenant


def make_key(session_factory, tenant: str, scopes: list[str] | None = None) -> str:
    with session_scope(session_factory) as session:
        _, plain = create_api_key(session, get_or_create_tenant(session, tenant), "mcp-test", scopes)
        return plain


@asynccontextmanager
async def http_client(base: str, key: str | None) -> AsyncIterator[Client]:
    """The SDK's client at `{base}/mcp`, sending the key as a REST client does."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=600) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
    ):
        yield client


def payload(result) -> dict:
    """A successful tool result's JSON (its text block and its structured content agree)."""
    assert not result.is_error, result.content[0].text
    body = json.loads(result.content[0].text)
    assert body == result.structured_content
    return body


def error_text(result) -> str:
    assert result.is_error, result
    return result.content[0].text
