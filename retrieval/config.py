"""The pipeline's configuration: platform defaults, then the collection's, then the request's."""

from __future__ import annotations

from typing import Any

from core.settings.retrieval import RetrievalConfig, RetrievalSettings


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "weights":
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def resolve_config(
    defaults: RetrievalSettings | RetrievalConfig, *overrides: dict[str, Any] | None
) -> RetrievalConfig:
    """Deep-merge partial overrides (a collection's `retrieval` JSON, a request's options) over the
    defaults; keys that are not pipeline options (e.g. bm25.text_config, an index-time setting)
    are ignored here."""
    merged = defaults.model_dump(include=set(RetrievalConfig.model_fields))
    for override in overrides:
        merged = deep_merge(merged, override or {})
    return RetrievalConfig.model_validate(merged)
