import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from tests.support.services import unique_name

pytestmark = pytest.mark.integration


def test_healthz(client):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_readyz_checks_database_broker_worker_and_models(client, celery_worker, broker_settings):
    resp = client.get("/readyz")
    assert resp.status_code == 200, resp.text
    assert resp.json()["checks"] == {"database": "ok", "broker": "ok", "worker": "ok", "models": "ok"}
    # no worker consumes another queue: not ready, and says what to start
    lonely = broker_settings.model_copy(update={"celery_queue": unique_name("nobody")})
    with TestClient(create_app(lonely)) as other:
        resp = other.get("/readyz")
    assert resp.status_code == 503 and "groundwork worker" in resp.json()["error"]["details"]["worker"]


def test_errors_use_the_json_error_model_and_carry_request_ids(client):
    resp = client.get("/no/such/route", headers={"x-request-id": "abc123"})
    assert resp.status_code == 404
    assert resp.headers["x-request-id"] == "abc123"
    assert set(resp.json()["error"]) == {"code", "message", "details"}
