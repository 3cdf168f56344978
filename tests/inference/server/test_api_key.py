"""`groundwork engine serve --api-key`: /v1 routes need the bearer key, as vLLM's --api-key."""

from __future__ import annotations

import httpx
import openai
import pytest

from inference.server import create_app
from tests.inference.server.conftest import MODEL_NAME
from tests.support.http import running

pytestmark = pytest.mark.slow


def test_v1_routes_need_the_key(engine):
    with running(create_app(engine, MODEL_NAME, api_key="s3cret")) as url:
        for key in ("wrong", "x"):
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0).models.list()
        bare = httpx.get(f"{url}/v1/models")
        assert bare.status_code == 401 and bare.headers["www-authenticate"] == "Bearer"
        assert bare.json()["error"]["type"] == "authentication_error"
        models = openai.OpenAI(base_url=f"{url}/v1", api_key="s3cret", max_retries=0).models.list()
        assert models.data[0].id == MODEL_NAME
