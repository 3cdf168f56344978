"""GET /v1/embedding-models: what a collection can be created with (the default and the allowlist)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from api.deps import CurrentTenant, SettingsDep
from core.registry import PACKAGED_MODELS

router = APIRouter(prefix="/v1", tags=["models"])


class EmbeddingModelOut(BaseModel):
    name: str
    description: str
    licence: str
    default: bool


@router.get("/embedding-models", response_model=list[EmbeddingModelOut])
def list_embedding_models(settings: SettingsDep, _: CurrentTenant):
    """The configured default, then the administrator's allowlist (`allowed_models`); packaged
    models other than sentence-transformers ones (the LLM) are left out."""
    out = []
    for name in dict.fromkeys([settings.embedding_model, *settings.allowed_models]):
        packaged = PACKAGED_MODELS.get(name)
        if packaged is not None and packaged.format != "sentence-transformers":
            continue
        out.append(
            EmbeddingModelOut(
                name=name,
                description=packaged.description if packaged else "allowed by the administrator",
                licence=packaged.licence if packaged else "",
                default=name == settings.embedding_model,
            )
        )
    return out
