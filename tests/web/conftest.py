"""Browser tests of the admin UI: the API (with its static UI) served on a loopback socket against the
session's database and real worker, driven by Playwright through Debian's Chromium.

Screenshots go to tmp/artifacts/web/ (or $GROUNDWORK_TEST_ARTIFACTS), one or more per test.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from core.database import session_scope
from core.tenancy import create_api_key, get_or_create_tenant
from tests.api.qa_corpus import DOCS
from tests.support.http import running
from tests.support.services import ROOT, wait_until

CHROMIUM = os.environ.get("GROUNDWORK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(os.environ.get("GROUNDWORK_TEST_ARTIFACTS", ROOT / "tmp" / "artifacts")) / "web"
WIDE = {"width": 1280, "height": 900}
SKIP_NO_PLAYWRIGHT = "browser tests need the `playwright` package (pip install -e '.[dev]')"

try:
    from playwright.sync_api import expect

    # Assertions retry up to this long: the machine running the suite may be busy.
    expect.set_options(timeout=15_000)
except ImportError:  # the test modules skip, saying why
    pass
NARROW = {"width": 390, "height": 844}

# A longer document, so that the document view has several chunks with overlaps to draw.
HANDBOOK = "\n\n".join(
    [
        "# Zephyr field handbook",
        "## Installing the gateway",
        "Mount the gateway at least two metres above the floor, away from metal cabinets. Connect the "
        "antenna before power, then wait for the status light to turn steady green. A blinking amber "
        "light means that the gateway has not found a network yet.",
        "## Pairing sensors",
        "Hold the pairing button of a sensor for five seconds. The gateway lists the sensor within a "
        "minute. Sensors that are further than forty metres away may need a repeater in between.",
        "## Maintenance",
        "Replace sensor batteries every eighteen months. Clean the humidity sensor's membrane with dry "
        "air only; water and solvents damage it. Firmware updates arrive over the air at night.",
    ]
).encode()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.skip(
            f"no browser: Chromium is not at {CHROMIUM}; "
            "apt-get install chromium (./dev.sh test does so when run as root)"
        )
    with sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        except Exception as exc:
            pytest.skip(f"Chromium at {CHROMIUM} did not start: {exc}")
        yield browser
        browser.close()


def _serve(settings):
    """Run the app's lifespan (state, sampler) and serve it on a real socket."""
    app = create_app(settings)
    with TestClient(app), running(app) as url:
        yield url


@pytest.fixture(scope="session")
def ui_url(broker_settings, celery_worker):
    """Base URL of the API + UI, auth off, with a real worker ingesting."""
    yield from _serve(broker_settings)


@pytest.fixture(scope="session")
def strict_url(broker_settings):
    """Base URL of a second API process view on the same database with auth required."""
    yield from _serve(broker_settings.model_copy(update={"auth_required": True}))


@pytest.fixture(scope="session")
def tenant_key(session_factory) -> str:
    with session_scope(session_factory) as session:
        _, plain = create_api_key(session, get_or_create_tenant(session, "web-tests"), "browser")
    return plain


@pytest.fixture(scope="session")
def corpus(ui_url) -> dict:
    """The QA corpus plus a longer handbook, ingested through the API into collection `web-qa`."""
    with httpx.Client(base_url=ui_url, timeout=60) as client:
        body = {"name": "web-qa", "chunking": {"strategy": "fixed", "chunk_size": 48, "chunk_overlap": 8}}
        collection = client.post("/v1/collections", json=body)
        assert collection.status_code == 201, collection.text
        files = [("files", (n, d, "text/plain")) for n, d in {**DOCS, "handbook.md": HANDBOOK}.items()]
        job = client.post(f"/v1/collections/{collection.json()['id']}/documents", files=files).json()

        def finished() -> bool:
            return client.get(f"/v1/jobs/{job['job_id']}").json()["status"] not in ("queued", "running")

        wait_until(finished, timeout=240, message="corpus ingested")
        state = client.get(f"/v1/jobs/{job['job_id']}").json()
        assert state["documents_done"] == len(DOCS) + 1, state
        docs = client.get(f"/v1/collections/{collection.json()['id']}/documents").json()["items"]
    return {"collection": collection.json(), "documents": {d["source_id"]: d for d in docs}}


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport=WIDE)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(30_000)
    yield page
    shot(page, f"{request.node.name}-end")
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    # A full-page capture of a scrolled page draws the sticky header where the viewport was (mid-page):
    # taken from the top, then scrolled back for the rest of the test.
    scrolled = page.evaluate("() => { const y = window.scrollY; window.scrollTo(0, 0); return y; }")
    page.screenshot(path=str(path), full_page=True)
    page.evaluate("(y) => window.scrollTo(0, y)", scrolled)
    return path


@pytest.fixture(scope="session")
def seeded_runs(session_factory, corpus) -> dict:
    """Agent and evaluation runs of the default tenant (auth off), written directly so that the
    pages can be checked without a model; their JSON has the shape the real code writes."""
    from tests.web.runs_data import seed_runs

    return seed_runs(session_factory, corpus)
