"""The built-in tools against real Postgres: tenant scoping and bounded, numbered results."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import select, text

from agents.tools import BUILTIN, ToolContext
from agents.tools.calculator import evaluate
from core.database import make_session_factory, session_scope
from core.models import Chunk, Collection, Document, Tenant
from core.tenancy import APP_ROLE, install_tenant_scoping

pytestmark = pytest.mark.integration


def test_calculator_does_arithmetic_and_nothing_else():
    assert evaluate("(3 + 4) * 2 ^ 2") == 28 and evaluate("sqrt(16) + abs(-1)") == 5
    for bad in ("__import__('os')", "open('x')", "9 ** 9 ** 9", "a + 1", "[1, 2]"):
        with pytest.raises(ValueError):
            evaluate(bad)


@pytest.fixture(scope="module")
def two_tenants(session_factory):
    """Tenant A with one document chunk; tenant B with nothing."""
    with session_scope(session_factory) as session:
        a, b = Tenant(name=f"tools-a-{uuid.uuid4().hex[:6]}"), Tenant(name=f"tools-b-{uuid.uuid4().hex[:6]}")
        session.add_all([a, b])
        session.flush()
        col = Collection(tenant_id=a.id, name="secret", embedding_model="none", embedding_dim=3, index_dim=3)
        session.add(col)
        session.flush()
        doc = Document(
            collection_id=col.id, source_id="s.txt", title="s.txt", content_hash="x", status="indexed"
        )
        session.add(doc)
        session.flush()
        chunk = Chunk(
            document_id=doc.id,
            collection_id=col.id,
            ordinal=0,
            text="the vault code is 4471",
            text_hash="h",
            token_count=6,
            char_start=0,
            char_end=22,
        )
        session.add(chunk)
        session.flush()
        return a.id, b.id, col.id, chunk.id, doc.id


def _ctx(session_factory, settings, tenant, collections=()):
    return ToolContext(session_factory, settings, tenant, list(collections), None)


def test_tools_read_as_their_tenant_under_row_level_security(db_engine, settings, two_tenants):
    a, b, col, chunk, doc = two_tenants
    scoped = make_session_factory(db_engine)
    install_tenant_scoping(scoped)  # as the platform's factory has it
    with _ctx(scoped, settings, a).session() as session:
        who = session.execute(text("SELECT current_user, current_setting('app.tenant_id', true)")).one()
        assert tuple(who) == (APP_ROLE, str(a))
    read = asyncio.run(BUILTIN["read_chunk"].run(_ctx(scoped, settings, a), {"ref": str(chunk)}))
    assert "4471" in read.text  # the owner's tools work under the policies
    with pytest.raises(LookupError):
        asyncio.run(BUILTIN["read_document"].run(_ctx(scoped, settings, b, [col]), {"ref": str(doc)}))


def test_tenant_b_cannot_read_or_list_tenant_a(session_factory, settings, two_tenants):
    a, b, col, chunk, doc = two_tenants
    owner = _ctx(session_factory, settings, a)
    read = asyncio.run(BUILTIN["read_chunk"].run(owner, {"ref": str(chunk)}))
    assert "4471" in read.text and read.data["number"] == 1
    assert "4471" in asyncio.run(BUILTIN["read_document"].run(owner, {"ref": "1"})).text
    stranger = _ctx(session_factory, settings, b, [col])  # even naming A's collection id
    for tool, ref in (("read_chunk", chunk), ("read_document", doc)):
        with pytest.raises(LookupError):
            asyncio.run(BUILTIN[tool].run(stranger, {"ref": str(ref)}))
    listed = asyncio.run(BUILTIN["list_collections"].run(stranger, {}))
    assert listed.data == {"collections": []}
    assert asyncio.run(BUILTIN["search"].run(stranger, {"query": "vault code"})).data == {"hits": []}
    with session_scope(session_factory) as session:
        assert session.scalar(select(Chunk.text).where(Chunk.id == chunk))  # it is there, just not B's


def test_invalid_arguments_are_refused_before_the_tool_runs(session_factory, settings, two_tenants):
    ctx = _ctx(session_factory, settings, two_tenants[0])
    with pytest.raises(ValueError, match="invalid arguments"):
        asyncio.run(BUILTIN["search"].run(ctx, {"query": "x" * 500}))
