import pytest

pytestmark = pytest.mark.integration


def test_healthz(client):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_readyz_checks_database_broker_and_models(client):
    resp = client.get("/readyz")
    assert resp.status_code == 200, resp.text
    assert resp.json()["checks"] == {"database": "ok", "broker": "ok", "models": "ok"}


def test_errors_use_the_json_error_model_and_carry_request_ids(client):
    resp = client.get("/no/such/route", headers={"x-request-id": "abc123"})
    assert resp.status_code == 404
    assert resp.headers["x-request-id"] == "abc123"
    assert set(resp.json()["error"]) == {"code", "message", "details"}
