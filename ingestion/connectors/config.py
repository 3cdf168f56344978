"""Per-kind connector configuration (validated at creation, stored as JSON) and the factory that
builds a connector from its row and the operator's settings."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, HttpUrl, model_validator

from core.settings import Settings
from ingestion.connectors.base import Connector
from ingestion.connectors.guard import AddressGuard

KINDS = ("web", "git", "folder")


class WebConfig(BaseModel):
    start_url: HttpUrl | None = Field(default=None, description="Where the crawl starts.")
    sitemap_url: HttpUrl | None = Field(
        default=None, description="A sitemap (or sitemap index) to seed from."
    )
    max_depth: int = Field(default=2, ge=0, le=10, description="Links followed from a seed, at most.")
    max_pages: int = Field(default=100, ge=1, le=10_000, description="Pages fetched per sync, at most.")
    same_site: bool = Field(default=True, description="Only follow links on the seed's host (www. aside).")
    delay_s: float = Field(default=1.0, ge=0, le=60, description="Pause between requests (politeness).")

    @model_validator(mode="after")
    def _a_seed(self) -> WebConfig:
        if not self.start_url and not self.sitemap_url:
            raise ValueError("a web connector needs start_url or sitemap_url")
        return self


class GitConfig(BaseModel):
    url: str = Field(description="http(s) URL of the repository, or a local path in an allowed folder.")
    branch: str = Field(default="main", pattern=r"^[A-Za-z0-9._/-]{1,200}$")
    include: list[str] = Field(default_factory=list, description="Globs of paths to take (all if empty).")
    exclude: list[str] = Field(default_factory=list, description="Globs of paths to leave out.")


class FolderConfig(BaseModel):
    path: str = Field(description="A directory inside one of the operator's connectors.allowed_folders.")
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


CONFIGS: dict[str, type[BaseModel]] = {"web": WebConfig, "git": GitConfig, "folder": FolderConfig}
Kind = Literal["web", "git", "folder"]


def validate_config(kind: str, config: dict) -> dict:
    """The config as stored (defaults filled in); raises pydantic's ValidationError."""
    return CONFIGS[kind].model_validate(config).model_dump(mode="json")


class _WebKnobs:
    """What the crawler needs from the settings, in one place."""

    def __init__(self, settings: Settings) -> None:
        knobs = settings.connectors
        self.web_min_delay_s, self.web_timeout_s = knobs.web_min_delay_s, knobs.web_timeout_s
        self.web_user_agent = knobs.web_user_agent
        self.max_bytes = int(settings.ingestion.max_file_mb * 1e6)


def build_connector(kind: str, config: dict, settings: Settings, connector_id: str) -> Connector:
    """The connector for a stored row; raises SourceError if the operator's settings forbid it."""
    knobs = settings.connectors
    guard = AddressGuard(knobs.allowed_private_networks)
    max_bytes = int(settings.ingestion.max_file_mb * 1e6)
    parsed = CONFIGS[kind].model_validate(config)
    if kind == "web":
        from ingestion.connectors.web import WebConnector

        return WebConnector(parsed, guard, _WebKnobs(settings))
    if kind == "git":
        from ingestion.connectors.git import GitConnector

        mirror = Path(settings.data_dir) / "connectors" / connector_id
        return GitConnector(parsed, mirror, guard, knobs.allowed_folders, max_bytes, knobs.max_items)
    from ingestion.connectors.folder import FolderConnector

    return FolderConnector(parsed, knobs.allowed_folders, max_bytes, knobs.max_items)


def check_allowed(kind: str, config: dict, settings: Settings) -> None:
    """Refuse, at configuration time, what the operator's settings forbid (SourceError): private
    addresses, server paths outside the allowlist. Each sync checks again."""
    from ingestion.connectors.folder import allowed_path

    knobs = settings.connectors
    guard = AddressGuard(knobs.allowed_private_networks)
    if kind == "web":
        for url in (config.get("start_url"), config.get("sitemap_url")):
            if url:
                guard.check(url)
    elif kind == "git" and config["url"].startswith(("http://", "https://")):
        guard.check(config["url"])
    else:
        allowed_path(config.get("path") or config["url"].removeprefix("file://"), knobs.allowed_folders)
