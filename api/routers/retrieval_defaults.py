"""GET /v1/retrieval/defaults: the server's search settings a collection's own retrieval overrides
start from, and which rerankers can run here (a cross-encoder needs a model configured; without one
it is skipped), so that clients offer only settings that take effect."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from api.deps import ReadingTenant, SettingsDep

router = APIRouter(prefix="/v1/retrieval", tags=["search"])


class RetrievalDefaultsOut(BaseModel):
    mode: str
    top_k: int
    fusion: dict
    rerank: dict
    rerankers: list[str]  # kinds that run on this server


@router.get("/defaults", response_model=RetrievalDefaultsOut)
def retrieval_defaults(settings: SettingsDep, _: ReadingTenant):
    r = settings.retrieval
    rerankers = ["llm"] + (["cross-encoder"] if r.rerank.model else [])
    return RetrievalDefaultsOut(
        mode=r.mode,
        top_k=r.top_k,
        fusion=r.fusion.model_dump(include={"method", "alpha", "k"}),
        rerank=r.rerank.model_dump(include={"enabled", "kind", "model", "candidates"}),
        rerankers=rerankers,
    )
