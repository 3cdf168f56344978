"""Request checks shared by routes: bounds the engine relies on, and option dictionaries whose
unknown keys must be refused rather than silently ignored."""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any

from pydantic import BaseModel, Field

from core.errors import ClientError
from core.settings import Settings
from retrieval.config import RetrievalConfig

# NOTE: the engine seeds a 64-bit generator; larger values overflowed inside it (issue 12).
SEED_MAX = 2**63 - 1
Seed = Annotated[int, Field(ge=0, le=SEED_MAX, description=f"Sampling seed, 0..{SEED_MAX}.")]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (also inside Optional[...]), if any."""
    candidates = [annotation]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        candidates = list(typing.get_args(annotation))
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def unknown_keys(data: Any, model: type[BaseModel], where: str = "") -> list[str]:
    """Dotted paths of keys in `data` that `model` (recursively) has no field for."""
    if not isinstance(data, dict):
        return []
    found: list[str] = []
    for key, value in data.items():
        path = f"{where}{key}"
        field = model.model_fields.get(key)
        if field is None:
            found.append(path)
            continue
        inner = _model_of(field.annotation)
        if inner is not None:
            found += unknown_keys(value, inner, path + ".")
    return found


def check_model_allowed(settings: Settings, spec: str | None, what: str) -> None:
    """Tenants choose among the models an administrator allowed (settings.allowed_models)."""
    if spec is not None and spec not in {settings.embedding_model, *settings.allowed_models}:
        raise ClientError(
            422,
            "model_not_allowed",
            f"{what} {spec!r} is not allowed on this server; an administrator adds models to "
            "allowed_models (GROUNDWORK_ALLOWED_MODELS)",
        )


def check_retrieval_options(options: dict[str, Any], settings: Settings, where: str = "options.") -> None:
    """Refuse pipeline options the pipeline would ignore (a typo must not silently change nothing),
    and rerank models outside the allowlist."""
    unknown = unknown_keys(options, RetrievalConfig, where)
    if unknown:
        raise ClientError(
            422, "invalid_retrieval", f"unknown retrieval option(s): {', '.join(unknown)}", details=unknown
        )
    rerank = options.get("rerank")
    if isinstance(rerank, dict):
        check_model_allowed(settings, rerank.get("model"), "rerank model")
