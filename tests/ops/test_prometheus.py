"""The alert rules in a real Prometheus (Debian's `prometheus` package) scraping a running platform on
loopback: `promtool check rules` passes, and an overload of the engine (a batch of one, ten
chat requests) makes the queue-depth and goodput alerts fire, then resolve once it drains."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.main import create_app
from core.settings.observability import RouteSlo, SloSettings
from tests.support.http import running
from tests.support.services import ROOT, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RULES = ROOT / "ops" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "ops" / "grafana" / "groundwork.json"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="no Prometheus: apt-get install -y prometheus (./dev.sh test does so when run as root)",
)
TESTED = {"GroundworkEngineQueueDeep", "GroundworkGoodputLow"}


@needs_prometheus
def test_promtool_accepts_the_rules_and_the_example_config():
    for args in (["check", "rules", str(RULES)], ["check", "config", str(RULES.with_name("prometheus.yml"))]):
        result = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def platform(broker_settings):
    """The API with a one-sequence engine batch, no admission control (so requests queue in the
    engine instead of being refused) and a chat TTFT SLO that queued requests miss."""
    settings = broker_settings.model_copy(
        update={
            "engine": broker_settings.engine.model_copy(update={"max_num_seqs": 1}),
            "qa": broker_settings.qa.model_copy(
                update={"answer_latency_target": None, "max_concurrent_answers": None}
            ),
            "slo": SloSettings(window_s=10, routes={"chat": RouteSlo(ttft_s=0.75, tpot_s=5, e2e_s=120)}),
        }
    )
    app = create_app(settings)
    with TestClient(app), running(app) as url:
        yield url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def prometheus(platform, tmp_path):
    """Prometheus scraping the platform every second, with the rules' `for:` cut to one second."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            rule["for"] = "1s"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    config = {
        # NOTE: 2 s, not 1: on a busy 2-core box a scrape can take over a second (then it fails).
        "global": {"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yml")],
        "scrape_configs": [{"job_name": "groundwork", "static_configs": [{"targets": [platform[7:]]}]}],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(url), timeout=30, message="Prometheus ready")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _alerts(url: str) -> dict[str, str]:
    """Alert name -> state (pending | firing) of the alerts Prometheus holds now."""
    alerts = httpx.get(f"{url}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    return {a["labels"]["alertname"]: a["state"] for a in alerts}


def _diagnosis(url: str) -> str:
    targets = httpx.get(f"{url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
    series = {
        q: httpx.get(f"{url}/api/v1/query", params={"query": f"max_over_time({q}[5m])"}, timeout=5).json()[
            "data"
        ]
        for q in ("groundwork:num_requests_waiting", "groundwork:max_num_seqs", "groundwork:goodput")
    }
    groups = httpx.get(f"{url}/api/v1/rules", timeout=5).json()["data"]["groups"]
    rules = {r["name"]: (r["health"], r.get("lastError"), r["state"]) for g in groups for r in g["rules"]}
    return f"targets: {[(t['health'], t['lastError']) for t in targets]}; series: {series}; rules: {rules}"


def _chat(url: str, model: str, max_tokens: int = 16) -> int:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Count to twenty."}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=600).status_code


@needs_prometheus
def test_queue_and_goodput_alerts_fire_under_overload_then_resolve(platform, prometheus, broker_settings):
    assert _chat(platform, broker_settings.llm_model, 2) == 200  # loads the engine before the overload
    firing: dict[str, str] = {}
    with ThreadPoolExecutor(10) as pool:
        # NOTE: 64 tokens each: the queue must outlast a few 2 s scrapes and the 1 s `for:` even on a
        # quiet machine (at 16 tokens a fast engine drained it before either alert could fire).
        statuses = pool.map(lambda _: _chat(platform, broker_settings.llm_model, 64), range(10))

        def fired() -> bool:
            firing.update({k: v for k, v in _alerts(prometheus).items() if v == "firing"})
            return set(firing) >= TESTED

        try:
            wait_until(fired, timeout=120, interval=0.5, message=f"{TESTED} firing (seen: {firing})")
        except TimeoutError as exc:
            raise AssertionError(_diagnosis(prometheus)) from exc
        assert all(s == 200 for s in statuses)
    wait_until(
        lambda: not TESTED & set(_alerts(prometheus)), timeout=90, interval=0.5, message="the alerts resolved"
    )
    scraped = httpx.get(f"{platform}/metrics").text
    families = {f.name for f in text_string_to_metric_families(scraped)}
    referenced = set(re.findall(r"groundwork[:_][a-z0-9_:]+", RULES.read_text() + DASHBOARD.read_text()))
    missing = {
        name
        for name in referenced
        if re.sub(r"_(total|bucket|sum|count)$", "", name) not in families and name not in families
    }
    assert not missing, f"alerts or dashboard use metrics /metrics does not export: {sorted(missing)}"


def test_rules_cover_the_operations_note():
    """Every alert has a section in ops/README.md saying what it means and what to check first."""
    note = (ROOT / "ops" / "README.md").read_text()
    names = [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert set(names) >= TESTED
    assert [n for n in names if f"### {n}" not in note] == []
