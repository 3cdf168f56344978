"""The web connector against a real loopback site: sitemap, robots.txt, duplicate URLs, a
redirect loop, a redirect to a private address; then a change on the site and a re-sync."""

from __future__ import annotations

import pytest

from ingestion.connectors.base import SourceError
from ingestion.connectors.guard import AddressGuard
from tests.api.connectors.helpers import documents, search_sources, sync_and_wait
from tests.api.connectors.site import Site, page
from tests.ingestion.helpers import create_collection

pytestmark = [pytest.mark.integration]

LOREM = "The page explains one topic at some length so that the extractor keeps it as main content. "


def _build(site: Site) -> None:
    u = site.url
    site.pages["/robots.txt"] = (200, "text/plain", "User-agent: *\nDisallow: /private/\n")
    sitemap = "".join(f"<url><loc>{u}{p}</loc></url>" for p in ("/", "/a.html", "/b.html#top"))
    site.pages["/sitemap.xml"] = (
        200,
        "application/xml",
        f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{sitemap}</urlset>',
    )
    links = [
        "a.html",
        "/b.html",
        "a.html#part",
        "/b-copy.html",
        "/private/secret.html",
        "/loop1",
        "/to-private",
        "http://10.1.2.3/offsite",
    ]
    site.html("/", page("Home", LOREM * 3 + "Welcome to the harbour almanac.", links))
    site.html(
        "/a.html", page("Tides", LOREM * 3 + "Spring tides follow the full moon.", ["/"], f"{u}/a.html")
    )
    site.html("/b.html", page("Gulls", LOREM * 3 + "Herring gulls nest on the cliffs.", ["/"]))
    # Another URL of page b: its canonical link makes it the same item.
    site.html(
        "/b-copy.html", page("Gulls", LOREM * 3 + "Herring gulls nest on the cliffs.", [], f"{u}/b.html")
    )
    site.html("/private/secret.html", page("Secret", "robots.txt forbids this page."))
    site.redirect("/loop1", "/loop2")
    site.redirect("/loop2", "/loop1")
    site.redirect("/to-private", "http://10.1.2.3/metadata")


def test_guard_refuses_private_and_non_http_addresses():
    guard = AddressGuard([])
    for url in (
        "http://127.0.0.1/",
        "http://10.0.0.5/x",
        "http://169.254.169.254/latest",
        "http://[::1]/",
        "file:///etc/passwd",
        "ftp://example.org/",
    ):
        with pytest.raises(SourceError):
            guard.check(url)
    AddressGuard(["127.0.0.0/8"]).check("http://127.0.0.1:9/")  # the operator's allowance


def test_crawl_then_resync_after_a_site_change(client, celery_worker):
    collection = create_collection(client, "web-site")
    with Site() as site:
        _build(site)
        refused = client.post(
            "/v1/collections/web-site/connectors",
            json={"name": "intranet", "kind": "web", "config": {"start_url": "http://10.9.9.9/"}},
        )
        assert refused.status_code == 422 and "private" in refused.json()["error"]["message"]
        created = client.post(
            "/v1/collections/web-site/connectors",
            json={
                "name": "site",
                "kind": "web",
                "config": {
                    "start_url": site.url + "/",
                    "sitemap_url": site.url + "/sitemap.xml",
                    "delay_s": 0,
                },
            },
        )
        assert created.status_code == 201, created.text
        connector = created.json()["id"]

        first = sync_and_wait(client, connector)
        assert first["status"] == "succeeded", first
        assert (first["added"], first["changed"], first["removed"]) == (3, 0, 0)
        docs = documents(client, "web-site")
        assert set(docs) == {site.url + p for p in ("/", "/a.html", "/b.html")}
        assert all(d["status"] == "indexed" for d in docs.values()), docs
        assert not any(r.startswith("/private/") for r in site.requests)
        assert site.requests.count("/a.html") == 1  # its duplicate URLs were not fetched again
        assert any("10.1.2.3" in r for r in first["details"]["refused"])
        assert any("redirect loop" in s for s in first["details"]["skipped"])
        assert any("duplicate of" in s and "b-copy" in s for s in first["details"]["skipped"])
        assert site.url + "/a.html" in search_sources(client, collection["id"], "spring tides full moon")
        # The navigation is boilerplate: it is not indexed as text.
        assert site.url + "/" not in search_sources(client, collection["id"], "secret html")

        site.html("/a.html", page("Tides", LOREM * 3 + "Neap tides follow the half moon.", ["/"]))
        del site.pages["/b.html"]
        del site.pages["/b-copy.html"]
        second = sync_and_wait(client, connector)
    assert second["status"] == "succeeded", second
    assert (second["added"], second["changed"], second["removed"], second["unchanged"]) == (0, 1, 1, 1)
    docs = documents(client, "web-site")
    assert set(docs) == {site.url + "/", site.url + "/a.html"}
    assert docs[site.url + "/a.html"]["version"] == 2 and docs[site.url + "/"]["version"] == 1
    assert search_sources(client, collection["id"], "neap tides half moon")[0] == site.url + "/a.html"
    assert client.get(f"/v1/connectors/{connector}/syncs").json()[0]["duration_s"] is not None
