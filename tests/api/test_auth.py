import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.deps import DEFAULT_TENANT_ID, CurrentTenant
from api.main import create_app
from core.database import session_scope
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
