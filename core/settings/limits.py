"""Settings of rate limits and quotas (see api/ratelimit.py)."""

from pydantic import BaseModel, Field


class LimitSettings(BaseModel):
    enabled: bool = Field(default=True, description="Enforce the rate limits below (quotas always hold).")
    storage_url: str | None = Field(
        default=None,
        description="Counter storage of the `limits` library (redis://..., memory://). Unset: the broker "
        "when it is Redis, else the platform's Postgres database (shared by all API processes).",
    )
    key_prefix: str = Field(default="groundwork", description="Prefix of the counters' keys in Redis.")
    requests_per_minute_per_key: int = Field(
        default=600, ge=1, description="Requests per minute of one API key to ask, chat, search, agents."
    )
    requests_per_minute_per_tenant: int = Field(
        default=1200, ge=1, description="Requests per minute all keys of one tenant may make together."
    )
    tokens_per_minute_per_key: int = Field(
        default=200_000, ge=1, description="Prompt + completion tokens per minute of one API key."
    )
    tokens_per_minute_per_tenant: int = Field(
        default=400_000, ge=1, description="Prompt + completion tokens per minute of one tenant."
    )
    max_json_body_mb: float = Field(
        default=4.0,
        gt=0,
        description="Largest request body the API reads, except multipart uploads (bounded by ingestion).",
    )
    input_tokens_per_minute_per_key: int | None = Field(
        default=None,
        ge=1,
        description="Prompt (input) tokens per minute of one API key (None: no own limit).",
    )
    output_tokens_per_minute_per_key: int | None = Field(
        default=None,
        ge=1,
        description="Completion (output) tokens per minute of one API key (None: no own limit).",
    )
    input_tokens_per_minute_per_tenant: int | None = Field(
        default=None, ge=1, description="Prompt (input) tokens per minute of one tenant (None: no own limit)."
    )
    output_tokens_per_minute_per_tenant: int | None = Field(
        default=None,
        ge=1,
        description="Completion (output) tokens per minute of one tenant (None: no own limit).",
    )
    max_documents_per_tenant: int = Field(
        default=1_000_000, ge=0, description="Documents one tenant may store, over all its collections."
    )
    max_stored_mb_per_tenant: float = Field(
        default=100_000.0, ge=0, description="Uploaded megabytes one tenant may store (documents' sizes)."
    )
