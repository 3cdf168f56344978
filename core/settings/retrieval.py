"""Settings of retrieval (see retrieval/README.md)."""

from pydantic import BaseModel, Field


class RetrievalSettings(BaseModel):
    rrf_k: int = Field(default=60, description="Reciprocal Rank Fusion constant.")
