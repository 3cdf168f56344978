"""Git (a local repository with commits) and folder connectors through the real worker; the
scheduler syncing a connector on its own."""

from __future__ import annotations

import time

import pytest
from dulwich import porcelain
from dulwich.repo import Repo

from tests.api.connectors.helpers import documents, search_sources, sync_and_wait
from tests.ingestion.helpers import create_collection

pytestmark = [pytest.mark.integration]
AUTHOR = b"Test <test@example.org>"


def _commit(repo_dir, files: dict[str, str | None], message: str) -> None:
    for rel, text in files.items():
        path = repo_dir / rel
        if text is None:
            porcelain.remove(str(repo_dir), paths=[str(path)])
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        porcelain.add(str(repo_dir), paths=[str(path)])
    porcelain.commit(str(repo_dir), message=message.encode(), author=AUTHOR, committer=AUTHOR)


def test_git_resync_reingests_only_changed_files(client, celery_worker, tmp_path):
    repo_dir = tmp_path / "repo"
    repo = Repo.init(str(repo_dir), mkdir=True)
    repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/main")
    repo.close()
    _commit(
        repo_dir,
        {
            "docs/one.md": "# One\n\nThe first file talks about lighthouses.",
            "docs/two.md": "# Two\n\nThe second file talks about harbours.",
            "docs/keep.md": "# Keep\n\nThis file never changes; it talks about buoys.",
            "src/tool.py": "print('excluded by the include glob')\n",
        },
        "first",
    )
    collection = create_collection(client, "git-docs")
    created = client.post(
        "/v1/collections/git-docs/connectors",
        json={
            "name": "repo",
            "kind": "git",
            "config": {"url": str(repo_dir), "branch": "main", "include": ["docs/**"]},
        },
    )
    assert created.status_code == 201, created.text
    connector = created.json()["id"]
    first = sync_and_wait(client, connector)
    assert first["status"] == "succeeded", first
    assert (first["added"], first["changed"], first["removed"]) == (3, 0, 0)
    assert {d.rsplit("#", 1)[1] for d in documents(client, "git-docs")} == {
        "docs/one.md",
        "docs/two.md",
        "docs/keep.md",
    }

    _commit(
        repo_dir,
        {
            "docs/one.md": None,
            "docs/two.md": "# Two\n\nThe second file now talks about tugboats.",
            "docs/three.md": "# Three\n\nA new file about sandbanks.",
        },
        "second",
    )
    second = sync_and_wait(client, connector)
    assert second["status"] == "succeeded", second
    assert (second["added"], second["changed"], second["removed"], second["unchanged"]) == (1, 1, 1, 1)
    job = client.get(f"/v1/jobs/{second['job_id']}").json()
    assert job["documents_total"] == 2  # only three.md and two.md went through the pipeline
    docs = {d.rsplit("#", 1)[1]: v for d, v in documents(client, "git-docs").items()}
    assert set(docs) == {"docs/two.md", "docs/keep.md", "docs/three.md"}
    assert docs["docs/keep.md"]["version"] == 1 and docs["docs/two.md"]["version"] == 2
    assert docs["docs/three.md"]["metadata"]["commit"] == second["details"]["commit"]
    assert search_sources(client, collection["id"], "tugboats")[0].endswith("#docs/two.md")


def test_scheduler_syncs_a_folder_on_its_own(client, celery_worker, tmp_path):
    folder = tmp_path / "share"
    folder.mkdir()
    (folder / "notes.txt").write_text("The scheduler brought this note about otters in.")
    create_collection(client, "folder-docs")
    outside = client.post(
        "/v1/collections/folder-docs/connectors",
        json={"name": "etc", "kind": "folder", "config": {"path": "/etc"}},
    )
    assert outside.status_code == 422 and "allowed_folders" in outside.json()["error"]["message"]
    created = client.post(
        "/v1/collections/folder-docs/connectors",
        json={"name": "share", "kind": "folder", "config": {"path": str(folder)}, "interval_s": 1},
    )
    assert created.status_code == 201, created.text
    connector = created.json()["id"]
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            docs = documents(client, "folder-docs")
            if docs and all(d["status"] == "indexed" for d in docs.values()):
                break
            time.sleep(0.5)
        syncs = client.get(f"/v1/connectors/{connector}/syncs").json()
    finally:
        client.patch(f"/v1/connectors/{connector}", json={"enabled": False})
    assert syncs and all(s["trigger"] == "schedule" for s in syncs)
    assert [d["source_id"] for d in docs.values()] == [f"file://{folder}/notes.txt"]
