"""Tenants managed by the operator: created with a first admin key, listed; other tenants' admins
may not, and a tenant name is taken once."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from core.database import session_scope
from core.tenancy import create_api_key, get_or_create_tenant

pytestmark = pytest.mark.integration


def test_operator_creates_and_lists_tenants_others_may_not(settings, session_factory):
    with session_scope(session_factory) as session:
        _, operator = create_api_key(session, get_or_create_tenant(session, "default"), "operator")
        _, other = create_api_key(session, get_or_create_tenant(session, f"o-{uuid.uuid4().hex[:6]}"), "x")
    strict = settings.model_copy(update={"auth_required": True})
    as_operator = {"authorization": f"Bearer {operator}"}
    name = f"team-{uuid.uuid4().hex[:6]}"
    with TestClient(create_app(strict)) as client:
        made = client.post("/v1/admin/tenants", json={"name": name}, headers=as_operator)
        assert made.status_code == 201, made.text
        new = {"authorization": f"Bearer {made.json()['key']}"}
        assert client.get("/v1/tenant", headers=new).json()["name"] == name
        assert client.post("/v1/admin/keys", json={"name": "ci"}, headers=new).status_code == 201  # admin
        listed = {t["name"]: t for t in client.get("/v1/admin/tenants", headers=as_operator).json()}
        assert listed[name]["live_keys"] == 2
        again = client.post("/v1/admin/tenants", json={"name": name}, headers=as_operator)
        assert again.status_code == 409 and again.json()["error"]["code"] == "tenant_exists"
        for headers in (new, {"authorization": f"Bearer {other}"}):
            refused = client.get("/v1/admin/tenants", headers=headers)
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_operator"
        bad = client.post("/v1/admin/tenants", json={"name": "../x"}, headers=as_operator)
        assert bad.status_code == 422
