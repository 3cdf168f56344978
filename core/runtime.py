"""Where this process finds its database: the configured server, or the embedded default."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.settings import Settings


@dataclass
class DatabaseHandle:
    url: str
    embedded: bool
    # Keeps the embedded server alive while this process runs (see core/embedded_pg.py).
    server: object | None = field(default=None, repr=False)
    supervisor: object | None = field(default=None, repr=False)

    def close(self) -> None:
        """Stop the embedded server if this process started it (others attached keep it running)."""
        if self.supervisor is not None:
            self.supervisor.stop()
            self.supervisor = None
        if self.server is not None:
            self.server.cleanup()
            self.server = None


def open_database(settings: Settings, supervise: bool = False) -> DatabaseHandle:
    """The configured database, else the embedded server (started or attached to); `supervise`
    (long-running processes) also restarts the embedded server whenever it stops."""
    if settings.database_url:
        return DatabaseHandle(settings.database_url, embedded=False)
    from core.embedded_pg import Supervisor, start_embedded_postgres

    url, server = start_embedded_postgres(settings.data_dir)
    supervisor = Supervisor(server).start() if supervise else None
    return DatabaseHandle(url, embedded=True, server=server, supervisor=supervisor)
