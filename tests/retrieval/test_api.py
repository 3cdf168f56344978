"""POST /v1/collections/{id}/search and `groundwork search`, end to end on the session database."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.main import create_app
from core.models import Tenant
from retrieval.corpus import CorpusDoc

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DOCS = [
    CorpusDoc(
        "manual", "Reset the router by holding the WPS button for ten seconds.", metadata={"lang": "en"}
    ),
    CorpusDoc(
        "recipe", "Whisk two eggs with sugar until pale, then fold in the flour.", metadata={"lang": "en"}
    ),
    CorpusDoc("notice", "Le routeur redémarre après une pression de dix secondes.", metadata={"lang": "fr"}),
]


@pytest.fixture(scope="module")
def client(settings):
    with TestClient(create_app(settings)) as c:
        yield c


def test_search_returns_chunks_with_provenance_and_stage_scores(client, make_collection):
    collection = make_collection(DOCS)
    body = {"query": "how do I reset my router", "top_k": 2, "mode": "hybrid", "debug": True}
    response = client.post(f"/v1/collections/{collection.id}/search", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    top = data["results"][0]
    assert top["source_id"] == "manual" and top["text"].startswith("Reset the router")
    assert (top["char_start"], top["char_end"]) == (0, len(top["text"]))
    assert {"bm25", "dense", "convex"} <= set(top["scores"])
    assert set(data["debug"]["rankings"]) == {"bm25", "dense"} and "timings_ms" in data["debug"]

    filtered = client.post(
        f"/v1/collections/{collection.id}/search",
        json={"query": "router", "mode": "dense", "filters": {"metadata": {"lang": "fr"}}},
    ).json()
    assert [r["source_id"] for r in filtered["results"]] == ["notice"]
    assert filtered["debug"] is None


def test_other_tenants_collections_and_bad_requests_are_refused(client, make_collection, session_factory):
    tenant = uuid.uuid4()
    with session_factory() as s:
        s.add(Tenant(id=tenant, name=f"api-{tenant.hex[:8]}"))
        s.commit()
    foreign = make_collection(DOCS, tenant_id=tenant)
    response = client.post(f"/v1/collections/{foreign.id}/search", json={"query": "router"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "collection_not_found"
    own = make_collection(DOCS)
    bad = client.post(f"/v1/collections/{own.id}/search", json={"query": "router", "mode": "fuzzy"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "validation_error"


def test_cli_search_prints_ranked_chunks(settings, make_collection, monkeypatch):
    import typer

    from cli.search import search
    from core.settings import get_settings

    collection = make_collection(DOCS)
    monkeypatch.setenv("GROUNDWORK_DATABASE_URL", settings.database_url)
    get_settings.cache_clear()
    app = typer.Typer()
    app.command()(search)
    result = CliRunner().invoke(app, [collection.name, "reset router", "--mode", "bm25", "-k", "1"])
    get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert result.output.startswith(" 1. manual [0:") and "bm25=" in result.output
