import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.deps import DEFAULT_TENANT_ID, CurrentTenant
from api.main import create_app
from core.database import session_scope
from core.models import ApiKey
from core.tenancy import create_api_key, get_or_create_tenant, revoke_api_key

pytestmark = pytest.mark.integration


def _app_with_whoami(settings) -> FastAPI:
    app = create_app(settings)

    @app.get("/whoami")
    def whoami(tenant: CurrentTenant) -> dict:
        return {"tenant": str(tenant)}

    return app


def test_keys_map_to_their_tenant_and_revoked_keys_are_refused(settings, session_factory):
    with session_scope(session_factory) as session:
        tenant = get_or_create_tenant(session, "acme")
        key_row, plain = create_api_key(session, tenant, "ci")
        tenant_id, prefix = tenant.id, key_row.prefix
    strict = settings.model_copy(update={"auth_required": True})
    with TestClient(_app_with_whoami(strict)) as client:
        assert client.get("/whoami").status_code == 401
        ok = client.get("/whoami", headers={"authorization": f"Bearer {plain}"})
        assert ok.json() == {"tenant": str(tenant_id)}
        with session_scope(session_factory) as session:
            assert revoke_api_key(session, prefix) == 1
        refused = client.get("/whoami", headers={"authorization": f"Bearer {plain}"})
        assert refused.status_code == 401 and "revoked" in refused.json()["error"]["message"]


def test_without_auth_required_requests_act_as_the_default_tenant(settings):
    with TestClient(_app_with_whoami(settings)) as client:
        assert client.get("/whoami").json() == {"tenant": str(DEFAULT_TENANT_ID)}


def test_a_tenant_at_its_share_is_refused_before_authentication_once_its_key_is_known(
    settings, session_factory, monkeypatch
):
    """api/early_refusal.py: a key this process authenticated, whose tenant holds its share of
    answers, gets its 503 before the key lookup and the rate limiter; another tenant is not refused
    there, and the key's last use is written once a minute, not on every request."""
    import api.deps as deps
    import api.ratelimit as ratelimit

    with session_scope(session_factory) as session:
        flooder, other = get_or_create_tenant(session, "flooder"), get_or_create_tenant(session, "other")
        (_, plain), (_, other_plain) = (
            create_api_key(session, flooder, "ci"),
            create_api_key(session, other, "ci"),
        )
        flooder_id = flooder.id
    calls: list[str] = []
    monkeypatch.setattr(deps, "authenticate", lambda *a, _f=deps.authenticate: calls.append("auth") or _f(*a))
    monkeypatch.setattr(ratelimit, "admit", lambda *a, _f=ratelimit.admit: calls.append("limit") or _f(*a))
    strict = settings.model_copy(update={"auth_required": True})
    body = {"collection": "missing", "question": "?"}
    with TestClient(create_app(strict)) as client:
        slots = client.app.state.groundwork.answer_slots
        held = [slots.admit(str(flooder_id)) for _ in range(slots.limit)]  # every slot, alone: borrowed
        first = client.post("/v1/ask", json=body, headers={"authorization": f"Bearer {plain}"})
        # An unknown key: authenticated, then refused before the rate limiter (counts no request).
        assert first.status_code == 503 and calls == ["auth"]
        calls.clear()
        again = client.post("/v1/ask", json=body, headers={"authorization": f"Bearer {plain}"})
        assert again.status_code == 503 and again.json()["error"]["code"] == "answers_busy"
        assert int(again.headers["retry-after"]) >= 1 and calls == []
        other_ask = client.post("/v1/ask", json=body, headers={"authorization": f"Bearer {other_plain}"})
        assert other_ask.status_code == 404 and calls == ["auth", "limit"]  # under its share: admitted
        for ticket in held:
            slots.release(ticket, generated=False)
        with session_scope(session_factory) as session:
            used = session.scalar(select(ApiKey.last_used_at).where(ApiKey.tenant_id == flooder_id))
        assert (
            client.post("/v1/ask", json=body, headers={"authorization": f"Bearer {plain}"}).status_code == 404
        )
        with session_scope(session_factory) as session:
            assert session.scalar(select(ApiKey.last_used_at).where(ApiKey.tenant_id == flooder_id)) == used
