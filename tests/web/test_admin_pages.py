"""Keys, auth, metrics, jobs and every page's layout in the browser."""

import re
import uuid

import httpx
import pytest

from tests.web.conftest import NARROW, SKIP_NO_PLAYWRIGHT, shot

expect = pytest.importorskip("playwright.sync_api", reason=SKIP_NO_PLAYWRIGHT).expect
pytestmark = [pytest.mark.integration]

WIDE = {"width": 1440, "height": 900}  # the review's widths: 1440 and 390 px
PAGES = ["collections", "upload", "documents", "search", "ask", "jobs", "metrics", "keys", "agents", "evals"]


def test_create_a_key_shown_once_then_revoke_it(page, ui_url):
    page.goto(f"{ui_url}/ui/#/keys")
    expect(page.get_by_role("heading", name="API keys")).to_be_visible()
    page.get_by_label("Name", exact=True).fill("ci-pipeline")
    page.get_by_role("button", name="Create key").click()
    key = page.locator("#new-key").input_value()
    assert key.startswith("gw_") and len(key) > 20
    row = page.locator(f"#keys-table tr[data-prefix='{key[:10]}']")
    expect(row).to_have_attribute("data-state", "live")
    assert httpx.get(f"{ui_url}/v1/tenant", headers={"authorization": f"Bearer {key}"}).status_code == 200
    shot(page, "keys-created")

    row.get_by_role("button", name="Revoke").click()
    page.get_by_role("button", name="Revoke key").click()
    expect(row).to_have_attribute("data-state", "revoked")
    expect(page.locator("#new-key")).to_have_count(1)  # the key stays only where it was first shown
    page.reload()
    expect(row).to_have_attribute("data-state", "revoked")  # (the list loaded again)
    assert key not in page.content()  # the list never shows a key again, only its prefix
    shot(page, "keys-revoked")


def test_the_operator_creates_a_tenant_whose_key_sees_only_its_own_tenant(page, ui_url, strict_url):
    page.goto(f"{ui_url}/ui/#/keys")
    name = f"team-{uuid.uuid4().hex[:6]}"
    page.get_by_label("Tenant name").fill(name)
    page.get_by_role("button", name="Create tenant").click()
    key = page.locator("#new-tenant-key").input_value()
    expect(page.locator(f"#tenants-table tr[data-tenant='{name}']")).to_contain_text("1")
    shot(page, "tenant-created")
    headers = {"authorization": f"Bearer {key}"}
    assert httpx.get(f"{strict_url}/v1/tenant", headers=headers).json()["name"] == name
    assert httpx.get(f"{strict_url}/v1/collections", headers=headers).json() == []
    assert httpx.get(f"{strict_url}/v1/admin/tenants", headers=headers).status_code == 403  # not the operator


def test_with_auth_required_a_wrong_key_is_refused_and_a_valid_one_admitted(page, strict_url, tenant_key):
    page.goto(f"{strict_url}/ui/#/collections")
    dialog = page.get_by_role("dialog", name="API key")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("requires an API key")
    expect(page.locator("#auth-banner")).to_be_hidden()  # auth is on here
    page.get_by_role("textbox", name="API key").fill("gw_not-a-real-key")
    page.get_by_role("button", name="Use key").click()
    expect(page.locator("#key-error")).to_contain_text("unknown, revoked or expired API key")
    shot(page, "auth-refused")
    page.get_by_role("textbox", name="API key").fill(tenant_key)
    page.get_by_role("button", name="Use key").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#who")).to_have_text("Tenant: web-tests")
    expect(page.get_by_role("heading", name="Collections")).to_be_visible()
    expect(page.get_by_text("No collections yet.")).to_be_visible()  # another tenant's corpus stays hidden
    shot(page, "auth-admitted")


def test_metrics_page_plots_sampled_history(page, ui_url):
    for _ in range(5):
        httpx.get(f"{ui_url}/v1/collections")
    page.goto(f"{ui_url}/ui/#/metrics")
    chart = page.locator("#chart-requests")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart).not_to_have_attribute("data-points", "0", timeout=20_000)
    expect(chart.locator(".now")).to_contain_text(re.compile(r"requests/s: \d"))
    ingest = page.locator("#chart-ingest")
    expect(ingest).not_to_have_attribute("data-points", "0")
    shot(page, "metrics")


def test_metrics_page_shows_goodput(page, ui_url, corpus):
    body = {"collection": "web-qa", "question": "What is the best recipe for chocolate cake?"}
    answer = httpx.post(f"{ui_url}/v1/ask", json=body, timeout=300)
    assert answer.status_code == 200 and answer.json()["grounded"] is False  # no generation needed
    page.goto(f"{ui_url}/ui/#/metrics")
    chart = page.locator("#chart-goodput")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart).not_to_have_attribute("data-points", "0", timeout=20_000)
    samples = httpx.get(f"{ui_url}/v1/metrics/history").json()["samples"]
    share = next(s["goodput"] for s in reversed(samples) if s["goodput"] is not None)
    expect(chart.locator(".now")).to_contain_text(f"meeting every SLO: {round(share * 100, 2):g} %")
    shot(page, "metrics-goodput")


def test_jobs_list_links_to_live_job(page, ui_url, corpus):
    page.goto(f"{ui_url}/ui/#/jobs")
    rows = page.locator("#jobs-table tbody tr")
    expect(rows.first).to_be_visible()
    page.get_by_label("Status").select_option("succeeded")
    expect(rows.first).to_have_attribute("data-status", "succeeded")
    rows.first.get_by_role("link").first.click()
    expect(page.locator(".job .job-summary")).to_contain_text("documents finished")
    shot(page, "job-detail")


@pytest.mark.parametrize("viewport", [WIDE, NARROW], ids=["wide", "narrow"])
def test_every_page_renders_without_sideways_overflow(page, ui_url, corpus, seeded_runs, viewport):
    page.set_viewport_size(viewport)
    handbook = corpus["documents"]["handbook.md"]["id"]
    details = [
        f"document/{handbook}",
        f"agent/{seeded_runs['agent_answered']}",
        f"agent/{seeded_runs['agent_waiting']}",
        f"agent/{seeded_runs['agent_long']}",
        f"eval/{seeded_runs['eval_sweep']}",
        f"ask?conversation={seeded_runs['conversation']}",
    ]
    for name in [*PAGES, *details]:
        page.goto(f"{ui_url}/ui/#/{name}")
        expect(page.locator("main h1")).to_be_visible()
        expect(page.locator(".loading")).to_have_count(0)
        if name == "metrics":
            expect(page.locator("#chart-requests canvas")).to_have_count(1)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{name} overflows sideways by {overflow}px at {viewport['width']}px"
        if name in ("agents", "evals"):  # their resources exist: the pages list them
            expect(page.get_by_text("Not available yet")).to_have_count(0)
        label = "-".join(
            re.split(r"[/?=]", name)[:1]
            + [k for k in ("waiting", "long") if seeded_runs.get(f"agent_{k}") in name]
        )
        shot(page, f"page-{label}{'-conversation' if '?' in name else ''}-{viewport['width']}")
    if viewport is NARROW:  # the navigation folds behind the menu button, which opens it
        expect(page.locator("#nav")).to_be_hidden()
        page.get_by_role("button", name="Menu").click()
        page.get_by_role("link", name="Collections").click()
        expect(page.get_by_role("heading", name="Collections")).to_be_visible()
