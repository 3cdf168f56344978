"""GET /v1/models: the one model this server serves."""

from __future__ import annotations

from fastapi import APIRouter

from inference.server.deps import ContextDep
from inference.server.schemas.common import ModelCard, ModelList

router = APIRouter(tags=["models"])


def _card(ctx: ContextDep) -> ModelCard:
    return ModelCard(id=ctx.model_name, max_model_len=ctx.engine.max_model_len)


@router.get("/v1/models")
async def list_models(ctx: ContextDep) -> ModelList:
    return ModelList(data=[_card(ctx)])


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(model_id: str, ctx: ContextDep) -> ModelCard:
    ctx.check_model(model_id)
    return _card(ctx)
