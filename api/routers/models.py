"""GET /v1/embedding-models: what a collection can be created with."""

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
    """The packaged embedding models and the configured default (which may be a path or hub id)."""
    out = [
        EmbeddingModelOut(
            name=m.name,
            description=m.description,
            licence=m.licence,
            default=m.name == settings.embedding_model,
        )
        for m in PACKAGED_MODELS.values()
        if m.format == "sentence-transformers"
    ]
    if not any(m.default for m in out):
        out.insert(
            0,
            EmbeddingModelOut(
                name=settings.embedding_model, description="configured", licence="", default=True
            ),
        )
    return out
