"""Schemathesis against the API's own OpenAPI document: whatever it generates, no 5xx, and every
answer matches what the document declares for its status (body schema and content type).

CI runs a bounded number of examples per operation (GROUNDWORK_FUZZ_EXAMPLES, default 12: a few
hundred calls). GROUNDWORK_FUZZ_CALLS sets the size as calls per test instead (spread over the
operations; what hypothesis leaves undone on an operation with few distinct cases goes to the next);
a larger run lifts the suite's per-test time limit: `GROUNDWORK_FUZZ_CALLS=10000 ./dev.sh test
tests/api/test_fuzz.py -s --timeout 0` (issue 28: 10,000 calls with and without auth).
"""

from __future__ import annotations

import asyncio
import copy
import math
import os

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from api.main import build_state, create_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLES = int(os.environ.get("GROUNDWORK_FUZZ_EXAMPLES", "12"))
CALLS = int(os.environ.get("GROUNDWORK_FUZZ_CALLS", "0"))  # 0: EXAMPLES per operation


CONFORMANCE = [response_schema_conformance, content_type_conformance]


def _fuzz(app, headers: dict | None = None) -> tuple[int, list[str]]:
    """Every operation, EXAMPLES (or CALLS / operations) generated cases each; returns (calls, the
    5xx answers and the answers that do not match their declared schema)."""
    app.openapi()  # NOTE: built (and cached) here, so that loading it is not timed by schemathesis
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    calls, errors = 0, []
    for done, operation in enumerate(operations):
        # What an operation with few distinct cases leaves undone goes to the ones after it.
        examples = max(1, math.ceil((CALLS - calls) / (len(operations) - done))) if CALLS else EXAMPLES

        @given(case=operation.as_strategy())
        @settings(
            max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def run(case) -> None:
            nonlocal calls
            response = case.call(headers=headers, timeout=300)  # the first LLM call loads the engine
            calls += 1
            where = f"{case.method} {case.formatted_path} -> {response.status_code}"
            if response.status_code >= 500:
                errors.append(f"{where}: {response.text[:300]}")
                return
            try:
                case.validate_response(response, checks=CONFORMANCE, headers=headers)
            except Exception as exc:  # schemathesis raises its failures (a group) as exceptions
                errors.append(f"{where}: does not match the schema: {str(exc)[:500]}")

        run()
    return calls, errors


@pytest.fixture(scope="module")
def app_for(broker_settings, celery_worker):
    """Apps on one shared state (one database pool, one engine: the first chat loads it), small; a
    worker runs on the queue, so /readyz is ready (it checks that one is alive)."""
    engine = broker_settings.engine.model_copy(update={"kv_cache_memory_gb": 0.1, "cpu_packed_rows": 0})
    base = build_state(broker_settings.model_copy(update={"engine": engine}))

    def make(**update):
        state = copy.copy(base)  # NOTE: its services shared, so that both apps use one engine
        state.settings = base.settings.model_copy(update=update)
        app = create_app(state.settings, state)
        app.state.groundwork = state  # schemathesis calls the ASGI app without its lifespan
        return app

    yield make
    asyncio.run(base.aclose())  # what the lifespan's exit does (schemathesis never runs it)


def test_no_server_errors_without_auth(app_for):
    calls, errors = _fuzz(app_for())
    print(f"schemathesis, auth off: {calls} calls, {len(errors)} 5xx or schema mismatches")
    assert not errors, "\n".join(errors[:20])


def test_no_server_errors_with_auth(app_for, session_factory):
    from core.database import session_scope
    from core.tenancy import create_api_key, get_or_create_tenant

    with session_scope(session_factory) as session:
        _, plain = create_api_key(session, get_or_create_tenant(session, "fuzz"), "fuzz")
    calls, errors = _fuzz(app_for(auth_required=True), {"authorization": f"Bearer {plain}"})
    print(f"schemathesis, auth required: {calls} calls, {len(errors)} 5xx or schema mismatches")
    assert not errors, "\n".join(errors[:20])
