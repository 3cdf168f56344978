"""Git connector (dulwich, pure Python: no git binary needed): a repository URL (http/https,
fetched into a bare mirror under <data_dir>/connectors/<id>) or a local path inside an
allowlisted folder; one branch; one document per file at the branch's commit, filtered by
include/exclude globs. An item's version is its blob id, so a re-sync fetches and re-ingests only
the files whose blob changed since the commit synced last (the tree diff), and removes the files
that left the tree."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

from dulwich.client import get_transport_and_path
from dulwich.errors import GitProtocolError, HangupException, NotGitRepository
from dulwich.objects import S_ISGITLINK
from dulwich.repo import Repo

from ingestion.connectors.base import Item, SourceError
from ingestion.connectors.folder import allowed_path, matches
from ingestion.connectors.guard import AddressGuard

_SYMLINK = 0o120000


class GitConnector:
    def __init__(self, config, mirror_dir: Path, guard: AddressGuard, roots, max_bytes: int, max_items: int):
        self.config, self.max_bytes, self.max_items = config, max_bytes, max_items
        self._skipped: list[str] = []
        self._commit: str | None = None
        remote = config.url.startswith(("http://", "https://"))
        if remote:
            guard.check(config.url)
            self.repo = self._fetch_mirror(config.url, mirror_dir)
        else:
            path = allowed_path(config.url.removeprefix("file://"), roots)
            try:
                self.repo = Repo(str(path))
            except NotGitRepository:
                raise SourceError(f"{config.url} is not a git repository") from None

    def _fetch_mirror(self, url: str, mirror_dir: Path) -> Repo:
        ref = f"refs/heads/{self.config.branch}".encode()
        if (mirror_dir / "HEAD").exists():
            repo = Repo(str(mirror_dir))
        else:
            shutil.rmtree(mirror_dir, ignore_errors=True)
            mirror_dir.mkdir(parents=True)
            repo = Repo.init_bare(str(mirror_dir))
        client, path = get_transport_and_path(url)
        try:
            result = client.fetch(
                path, repo, determine_wants=lambda refs, depth=None: [refs[ref]] if ref in refs else []
            )
        except (GitProtocolError, HangupException, OSError) as exc:
            raise SourceError(f"cannot fetch {url}: {exc}") from None
        if ref not in result.refs:
            raise SourceError(f"{url} has no branch {self.config.branch!r}")
        repo.refs[ref] = result.refs[ref]
        return repo

    def _head(self) -> bytes:
        for ref in (
            f"refs/heads/{self.config.branch}".encode(),
            f"refs/remotes/origin/{self.config.branch}".encode(),
        ):
            if ref in self.repo.refs:
                return self.repo.refs[ref]
        raise SourceError(f"the repository has no branch {self.config.branch!r}")

    def list_items(self) -> Iterator[Item]:
        commit = self.repo[self._head()]
        self._commit = commit.id.decode()
        count = 0
        for entry in self.repo.object_store.iter_tree_contents(commit.tree):
            path = entry.path.decode("utf-8", "replace")
            if S_ISGITLINK(entry.mode) or entry.mode == _SYMLINK:
                continue
            if not matches(path, self.config.include, self.config.exclude):
                continue
            count += 1
            if count > self.max_items:
                raise SourceError(f"more than {self.max_items} files match in the repository")
            yield Item(
                f"git:{self.config.url}#{path}",
                entry.sha.decode(),
                path.rsplit("/", 1)[-1],
                metadata={"path": path, "commit": self._commit, "branch": self.config.branch},
            )

    def fetch(self, item: Item) -> bytes:
        blob = self.repo[item.version.encode()]
        if blob.raw_length() > self.max_bytes:
            self._skipped.append(item.metadata["path"])
            raise ValueError("file too large")
        return blob.as_raw_string()

    def state(self) -> dict:
        return {"commit": self._commit} if self._commit else {}

    def details(self) -> dict:
        details = self.state()
        if self._skipped:
            details["skipped"] = self._skipped[:50]
        return details

    def close(self) -> None:
        self.repo.close()
