"""Folder connector: files under a server directory the operator allowlisted
(`connectors.allowed_folders`), e.g. an NFS or SMB mount. Version: modification time and size."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from pathlib import Path

from ingestion.connectors.base import Item, SourceError


def allowed_path(path: str, roots: list[Path]) -> Path:
    """The resolved path if it lies inside an allowlisted root (symlinks resolved), else SourceError."""
    resolved = Path(path).expanduser().resolve()
    for root in roots:
        if resolved == root.resolve() or resolved.is_relative_to(root.resolve()):
            return resolved
    raise SourceError(
        f"{path} is not inside a folder the operator allows (connectors.allowed_folders)"
        if roots
        else "no server folder may be read: the operator has set no connectors.allowed_folders"
    )


def matches(path: str, include: list[str], exclude: list[str]) -> bool:
    """Glob filters on a relative path; `**/` also matches files at the top."""

    def hit(pattern: str) -> bool:
        return fnmatch.fnmatchcase(path, pattern) or (
            pattern.startswith("**/") and fnmatch.fnmatchcase(path, pattern[3:])
        )

    return (not include or any(hit(p) for p in include)) and not any(hit(p) for p in exclude)


class FolderConnector:
    def __init__(self, config, roots: list[Path], max_bytes: int, max_items: int) -> None:
        self.root = allowed_path(config.path, roots)
        self.roots, self.config, self.max_bytes, self.max_items = roots, config, max_bytes, max_items
        self._skipped: list[str] = []

    def list_items(self) -> Iterator[Item]:
        if not self.root.is_dir():
            raise SourceError(f"{self.config.path} is not a directory")
        count = 0
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                rel = path.relative_to(self.root).as_posix()
                if name.startswith(".") or not matches(rel, self.config.include, self.config.exclude):
                    continue
                stat = path.stat()
                if path.is_symlink() or stat.st_size > self.max_bytes:
                    self._skipped.append(rel)
                    continue
                count += 1
                if count > self.max_items:
                    raise SourceError(f"more than {self.max_items} files under {self.config.path}")
                yield Item(
                    f"file://{path}", f"{stat.st_mtime_ns}-{stat.st_size}", name, metadata={"path": rel}
                )

    def fetch(self, item: Item) -> bytes:
        path = allowed_path(item.id.removeprefix("file://"), self.roots)  # swapped for a link since?
        return path.read_bytes()

    def state(self) -> dict:
        return {}

    def details(self) -> dict:
        return {"skipped": self._skipped[:50]} if self._skipped else {}

    def close(self) -> None:
        pass
