"""Agent runs and evaluation runs in the browser: lists, run pages, live polling, cancel, sweep,
compare. Runs are inserted as rows (tests/web/runs_data.py) so that no model is needed."""

import re

import pytest

from tests.web.conftest import SKIP_NO_PLAYWRIGHT, shot
from tests.web.runs_data import BATTERIES

expect = pytest.importorskip("playwright.sync_api", reason=SKIP_NO_PLAYWRIGHT).expect
pytestmark = [pytest.mark.integration]


def test_agent_runs_list_links_to_a_run_with_its_trace_and_citations(page, ui_url, seeded_runs):
    page.goto(f"{ui_url}/ui/#/agents")
    row = page.locator(f"#agent-runs tr[data-id='{seeded_runs['agent_answered']}']")
    expect(row).to_contain_text("completed")
    expect(row).to_contain_text(BATTERIES)
    expect(row).to_contain_text("answered")
    expect(row).to_contain_text("954")  # tokens: prompt + completion
    expect(page.get_by_role("form", name="Start an agent run")).to_be_visible()
    shot(page, "agent-runs")

    row.get_by_role("link").click()
    expect(page.get_by_role("heading", name=re.compile("Agent run"))).to_be_visible()
    expect(page.locator("#nav a[aria-current='page']")).to_have_text("Agent runs")
    steps = page.locator("#run-trace > li")
    expect(steps).to_have_count(6)
    assert steps.evaluate_all("els => els.map(e => e.dataset.type)") == [
        "llm",
        "tool_call",
        "tool_result",
        "llm",
        "answer",
        "claim_check",
    ]
    expect(steps.nth(5)).to_contain_text("0 of 1 sentences unsupported · leaves out Zephyr, Orca")
    expect(steps.nth(1)).to_contain_text("sensor battery replacement")  # the call's arguments
    expect(steps.nth(2)).to_contain_text("batteries")  # the observation
    expect(page.locator("#run-summary")).to_contain_text("954 (900 in, 54 out)")
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)  # finished
    cite = page.locator("#run-answer a.cite")
    expect(cite).to_have_text("[1]")
    # the run's claim check: the sentence marked, its evidence shown on focus
    expect(page.locator(".grounding")).to_contain_text("1 of 1 sentences supported")
    page.locator("#run-answer .claim-supported").focus()
    expect(page.locator(".evidence")).to_contain_text("Replace sensor batteries")
    shot(page, "agent-run-answered")
    cite.click()
    expect(page).to_have_url(
        re.compile(f"#/document/{seeded_runs['document']}\\?chunk={seeded_runs['chunk']}&start=\\d+&end=\\d+")
    )
    expect(page.locator("mark.cited")).to_contain_text("batteries")


def test_agent_run_waiting_for_a_client_tool_shows_the_call_and_can_be_cancelled(page, ui_url, seeded_runs):
    # (Cancel may be the agent runner's first use in this process: it sets up its tables first.)
    page.goto(f"{ui_url}/ui/#/agent/{seeded_runs['agent_waiting']}")
    pending = page.locator("#run-pending")
    expect(pending).to_contain_text("Waiting for client tool outputs")
    expect(pending).to_contain_text("lookup_ticket")
    expect(pending).to_contain_text('{"ticket":"ZX-42"}')
    expect(page.locator("#run-trace li[data-type='plan']")).to_contain_text("#E1 lookup_ticket[ZX-42]")
    shot(page, "agent-run-waiting")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("#run-summary")).to_contain_text("cancelled")
    expect(page.locator("#run-pending")).to_have_count(0)
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)


def test_failed_agent_run_says_why(page, ui_url, seeded_runs):
    page.goto(f"{ui_url}/ui/#/agent/{seeded_runs['agent_failed']}")
    expect(page.get_by_role("alert")).to_contain_text("the planner wrote no valid plan")
    expect(page.locator("#run-trace li[data-type='stopped']")).to_contain_text("error")
    shot(page, "agent-run-failed")


def test_evals_list_and_sweep_run_with_metrics_plot_and_compare(page, ui_url, seeded_runs):
    page.goto(f"{ui_url}/ui/#/evals")
    sweep_row = page.locator(f"#eval-runs tr[data-id='{seeded_runs['eval_sweep']}']")
    expect(sweep_row).to_contain_text("alpha sweep")
    expect(sweep_row).to_contain_text("9 / 9")
    expect(sweep_row).to_contain_text("ndcg@10 0.740")  # the best variant's, not the first one's
    expect(sweep_row).to_contain_text("best: hybrid a=0.5")
    expect(page.locator(f"#eval-runs tr[data-id='{seeded_runs['eval_running']}']")).to_contain_text("3 / 10")
    shot(page, "evals")

    sweep_row.get_by_role("link").click()
    expect(page.get_by_role("heading", name="Evaluation alpha sweep")).to_be_visible()
    expect(page.locator("#nav a[aria-current='page']")).to_have_text("Evaluations")
    metrics = page.locator("#eval-metrics tbody tr")
    expect(metrics).to_have_count(3)
    expect(page.locator("#eval-metrics thead th").nth(1)).to_have_text("ndcg@10")  # the main metric first
    expect(page.locator("#eval-metrics tr[data-variant='hybrid a=0.5']")).to_contain_text("0.740")
    expect(page.locator("#eval-sweep tbody tr")).to_have_count(3)
    expect(page.locator("#eval-sweep tr[data-variant='hybrid a=0.5']")).to_contain_text("best")
    plot = page.locator("img.sweep-plot")
    expect(plot).to_have_count(1)
    expect(plot).to_have_attribute("src", re.compile("^blob:"))
    page.wait_for_function("document.querySelector('img.sweep-plot').naturalWidth > 0")

    # The sweep is also an interactive chart: pointing at a point names its variant.
    chart = page.locator("#sweep-chart")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart).to_have_attribute("data-points", "3")

    # Runs on another dataset are listed but cannot be picked (they share no items).
    other = page.locator(f"#compare-with option[value='{seeded_runs['eval_elsewhere']}']")
    expect(other).to_be_disabled()
    expect(other).to_contain_text("other dataset")
    page.get_by_label("This run's variant").select_option("dense")
    page.get_by_label("Compare with").select_option(seeded_runs["eval_baseline"])
    compare = page.locator("#eval-compare")
    expect(compare).to_contain_text("ndcg@10")
    # this run's dense variant 0.61 against the baseline's 0.55
    expect(compare.locator("tr", has_text="ndcg@10").first).to_contain_text("-0.0600")
    expect(page.get_by_text(re.compile(r"over 3 shared items"))).to_be_visible()
    page.get_by_label("This run's variant").select_option("hybrid a=0.5")  # the picker is used
    expect(compare.locator("tr", has_text="ndcg@10").first).to_contain_text("-0.190")

    # Per item: which queries got worse from the baseline variant to this one.
    page.get_by_label("Variant", exact=True).select_option("dense")
    page.get_by_label("Baseline").select_option("hybrid a=0.5")
    page.get_by_label("Show").select_option("worse")
    items = page.locator("#eval-items tbody tr")
    expect(items).to_have_count(2)  # 0.5 < 0.7 and 0.6 < 0.8; 0.73 > 0.72 is not worse
    assert all(float(d) < 0 for d in items.evaluate_all("rs => rs.map(r => r.dataset.delta)"))
    shot(page, "eval-sweep")


def test_running_eval_shows_progress_polls_and_can_be_cancelled(page, ui_url, seeded_runs):
    page.goto(f"{ui_url}/ui/#/eval/{seeded_runs['eval_running']}")
    expect(page.locator(".eval-progress")).to_contain_text("evaluating: 30%")
    expect(page.locator(".eval-progress progress")).to_have_attribute("value", "0.3")
    shot(page, "eval-running")
    # The page polls while the run works, and stops once the route changes.
    run_url = f"{ui_url}/v1/evals/{seeded_runs['eval_running']}"
    with page.expect_request(run_url, timeout=10_000):
        pass
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if r.url == run_url else None)
    page.get_by_role("link", name="← all evaluations").click()
    expect(page.locator("#eval-runs")).to_be_visible()
    page.wait_for_timeout(4500)
    assert polls == [], f"the run page still polls after leaving it: {polls}"
    page.go_back()
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("#eval-summary")).to_contain_text("cancelled")
    expect(page.locator(".eval-progress")).to_have_count(0)
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)


def test_failed_eval_shows_its_error(page, ui_url, seeded_runs):
    page.goto(f"{ui_url}/ui/#/eval/{seeded_runs['eval_failed']}")
    expect(page.get_by_role("alert")).to_contain_text("no corpus.jsonl in missing")
    expect(page.locator("#eval-metrics")).to_have_count(0)
    expect(page.get_by_text("No metrics.")).to_be_visible()
    shot(page, "eval-failed")


def test_a_run_started_from_the_form_shows_its_steps_as_they_happen(page, ui_url, corpus):
    """The packaged model: the run page polls and steps appear live; the run either finishes within
    two minutes or is cancelled from the page, and its row in the list follows."""
    page.goto(f"{ui_url}/ui/#/agents")
    page.get_by_label("Agent", exact=True).select_option("react")
    page.get_by_label("web-qa").check()
    page.get_by_label("Task", exact=True).fill("How often should the sensor batteries be replaced?")
    page.get_by_role("button", name="Start run").click()
    expect(page).to_have_url(re.compile(r"#/agent/[0-9a-f-]{36}$"), timeout=120_000)
    run_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#run-trace > li").first).to_be_visible(timeout=120_000)  # appeared by polling
    shot(page, "agent-run-live")
    finished = page.locator("#run-summary dd .badge-completed, #run-summary dd .badge-failed")
    try:
        expect(finished).to_have_count(1, timeout=120_000)
    except AssertionError:
        page.get_by_role("button", name="Cancel run").click()
        expect(page.locator("#run-summary")).to_contain_text("cancelled", timeout=30_000)
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)
    shot(page, "agent-run-live-finished")
    page.get_by_role("link", name="← all agent runs").click()
    expect(page.locator(f"#agent-runs tr[data-id='{run_id}']")).not_to_have_attribute(
        "data-status", "running"
    )
