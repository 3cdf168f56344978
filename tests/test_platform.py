"""The platform and the API's state hold their services as typed fields, not in an untyped bag."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from agents.runs.runner import AgentRunner
from api.admission import AnswerSlots
from api.early_refusal import KnownKeys
from api.metrics import PlatformMetrics
from api.metrics_history import MetricsSampler
from api.ratelimit import RateLimiter
from api.state import AppState
from usecases.platform import Platform

# What api/state.py imports for type checking only.
_SERVICES = {
    c.__name__: c for c in (AgentRunner, AnswerSlots, KnownKeys, PlatformMetrics, MetricsSampler, RateLimiter)
}


@pytest.mark.unit
@pytest.mark.parametrize("cls", [Platform, AppState])
def test_every_service_is_a_typed_field_and_none_a_dict(cls):
    hints = typing.get_type_hints(cls, localns=_SERVICES)
    fields = {f.name: hints[f.name] for f in dataclasses.fields(cls)}
    loose = {
        name: hint
        for name, hint in fields.items()
        if hint in (dict, object, typing.Any) or typing.get_origin(hint) is dict
    }
    assert not loose, loose
    assert {"llm", "mcp_pool", "engine", "sessions"} <= set(fields)
