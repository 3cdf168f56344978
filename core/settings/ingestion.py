"""Settings of the ingestion pipeline (see ingestion/README.md)."""

from pydantic import BaseModel, Field


class IngestionSettings(BaseModel):
    max_file_mb: float = Field(default=50.0, description="Uploads larger than this fail with a reason.")
