"""The connector interface: list a source's items (a stable id, a version, an ACL hint) and fetch
one. Everything else (what changed, what to ingest, what to delete, the history) is the sync's
job (sync.py), the same for every source."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol


class SourceError(Exception):
    """The source as a whole cannot be read (bad URL, refused address, missing branch): the sync
    fails with this message and deletes nothing."""


@dataclass
class Item:
    id: str  # stable across syncs; becomes the document's source id
    version: str  # changes when the content does (ETag, blob sha, content hash, mtime+size)
    filename: str  # what the parser's type sniffing may use to break ties
    acl: list[str] = field(default_factory=list)  # who may read it at the source, a hint only
    title: str = ""
    metadata: dict = field(default_factory=dict)


class Connector(Protocol):
    def list_items(self) -> Iterator[Item]:
        """Every item the source holds now; raises SourceError if the listing cannot complete."""
        ...

    def fetch(self, item: Item) -> bytes:
        """The item's bytes; any exception fails only this item."""
        ...

    def state(self) -> dict:
        """What to remember until the next sync (e.g. the commit); also shown in the history."""
        ...

    def details(self) -> dict:
        """What the sync should report beyond counts (refused URLs, skipped files)."""
        ...

    def close(self) -> None: ...
