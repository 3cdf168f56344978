"""Eval dataset paths are the caller's: another tenant's upload answers like a missing one (404),
and no error names the server's data dir."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from core.database import session_scope
from core.tenancy import create_api_key, get_or_create_tenant

pytestmark = pytest.mark.integration


def _key(session_factory) -> dict:
    with session_scope(session_factory) as session:
        tenant = get_or_create_tenant(session, f"evs-{uuid.uuid4().hex[:8]}")
        _, plain = create_api_key(session, tenant, "e")
    return {"authorization": f"Bearer {plain}"}


def _answer_run(path: str) -> dict:
    return {"kind": "answer", "dataset": {"path": path, "format": "jsonl"}}


def test_another_tenants_dataset_is_not_found_and_errors_hold_no_server_path(settings, session_factory):
    strict = settings.model_copy(update={"auth_required": True})
    owner, intruder = _key(session_factory), _key(session_factory)
    items = json.dumps({"question": "what rises?", "answer": "bread"}).encode()
    data_dir = str(strict.data_dir.resolve())
    with TestClient(create_app(strict)) as client:
        made = client.post("/v1/evals/datasets", files=[("files", ("items.jsonl", items))], headers=owner)
        assert made.status_code == 201, made.text
        path = made.json()["path"]
        assert client.post("/v1/evals/estimate", json=_answer_run(path), headers=owner).json()["items"] == 1

        missing = path.rsplit("/", 1)[0] + "/" + uuid.uuid4().hex
        answers = {}
        for name, probe in {
            "theirs": path,
            "theirs, spelled otherwise": f"./{path}/../{path.rsplit('/', 1)[1]}",
            "missing": missing,
            "the folder": ".",
            "the uploads": "uploads",
            "outside": "../../../etc",
        }.items():
            for route in ("/v1/evals/estimate", "/v1/evals"):
                response = client.post(route, json=_answer_run(probe), headers=intruder)
                assert response.status_code == 404, (name, route, response.text)
                assert response.json()["error"]["code"] == "dataset_not_found"
                assert data_dir not in response.text and str(strict.data_dir) not in response.text
                answers[name] = response.json()["error"]["message"].replace(repr(probe), "<path>")
        assert len(set(answers.values())) == 1, answers  # "not yours" reads like "missing"

        # A malformed dataset of one's own: the reason names files relative to evals/.
        bad = client.post("/v1/evals/datasets", files=[("files", ("x.txt", b"hello"))], headers=owner)
        refused = client.post("/v1/evals/estimate", json=_answer_run(bad.json()["path"]), headers=owner)
        assert refused.status_code == 422, refused.text
        assert data_dir not in refused.text and "items.jsonl" in refused.text
