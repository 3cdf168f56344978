"""Durable store of uploaded bytes under `<data_dir>/blobs`, so that any worker process on the host
(or on a shared volume) can read what the API received.

NOTE: keys are random per upload, never content hashes, so two documents never share a file and
deleting one document's bytes cannot race with another upload of the same content.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

COPY_CHUNK = 1 << 20


@dataclass
class Staged:
    """Bytes already in the store, as `put_stream` wrote them (key None: over the size limit)."""

    key: str | None
    size: int
    digest: str
    blank: bool  # nothing but whitespace


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def for_data_dir(cls, data_dir: Path) -> BlobStore:
        return cls(Path(data_dir) / "blobs")

    def _path(self, key: str) -> Path:
        if len(key) != 32 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"invalid blob key {key!r}")
        return self.root / key[:2] / key

    def put(self, data: bytes) -> str:
        """Write, fsync and atomically rename; the bytes are on disk when this returns."""
        key = uuid.uuid4().hex
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
        return key

    def put_stream(self, src: BinaryIO, max_bytes: int) -> Staged:
        """Copy `src` to the store in 1 MB pieces, hashing as it goes, so that no upload is ever
        held in memory whole; past `max_bytes` it stops and keeps nothing."""
        key = uuid.uuid4().hex
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        digest, size, blank = hashlib.sha256(), 0, True
        with tmp.open("wb") as fh:
            while piece := src.read(COPY_CHUNK):
                size += len(piece)
                if size > max_bytes:
                    break
                digest.update(piece)
                blank = blank and not piece.strip()
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        if size > max_bytes:
            tmp.unlink(missing_ok=True)
            return Staged(None, size, "", False)
        tmp.replace(path)
        return Staged(key, size, digest.hexdigest(), blank)

    def get(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def delete(self, key: str | None) -> None:
        if key:
            self._path(key).unlink(missing_ok=True)
