"""Settings of the connectors (ingestion/connectors/): what the operator lets tenants reach."""

from pathlib import Path

from pydantic import BaseModel, Field


class ConnectorSettings(BaseModel):
    allowed_folders: list[Path] = Field(
        default_factory=list,
        description="Server directories that folder connectors (and git connectors on a local path) may "
        "read, e.g. NFS/SMB mounts. Empty: no server path may be read.",
    )
    allowed_private_networks: list[str] = Field(
        default_factory=list,
        description="CIDRs that web and git connectors may reach although they are private, loopback or "
        'link-local (e.g. ["10.20.0.0/16"] for an intranet). Empty: only public addresses (SSRF guard).',
    )
    scheduler_tick_s: float = Field(
        default=15.0, description="How often each worker looks for connectors due for a scheduled sync."
    )
    min_interval_s: int = Field(default=60, description="Shortest schedule a connector may ask for.")
    sync_time_limit_s: float = Field(
        default=3600.0, description="A sync still running after this is stopped and marked failed."
    )
    max_items: int = Field(default=10_000, description="Items one connector may list, at most.")
    web_timeout_s: float = Field(default=20.0, description="Timeout of one web request.")
    web_user_agent: str = Field(default="GroundworkBot/0.1", description="User agent of the web crawler.")
    web_min_delay_s: float = Field(
        default=0.0, description="Floor of the politeness delay between requests to one site."
    )
