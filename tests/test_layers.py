"""The layer drawing, checked on the imports: api/cli -> usecases/agents/evals ->
retrieval/ingestion/inference -> core, nothing upward; the engine (inference/) stands alone; routers
never import routers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYER = {
    "core": 0,
    "web": 0,
    "migrations": 1,
    "inference": 1,
    "retrieval": 1,
    "ingestion": 1,
    "agents": 2,
    "evals": 2,
    "usecases": 2,
    "api": 3,
    "cli": 4,
}


# NOTE: the platform's serving glue kept beside the engine (the one LLM provider, the vLLM server it
# supervises, the replica router) reads the platform's settings; the engine itself imports nothing of ours.
SERVING_GLUE = {"inference/provider.py", "inference/vllm_server.py", "inference/router.py"}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.unit
def test_nothing_imports_upward():
    upward = [
        f"{path.relative_to(ROOT)} imports {name}"
        for package, layer in LAYER.items()
        for path in _files(package)
        for name in _imports(path)
        if LAYER.get(name.split(".")[0], -1) > layer
    ]
    assert not upward, upward


@pytest.mark.unit
def test_the_engine_imports_no_other_package_of_ours():
    outside = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _files("inference")
        if str(path.relative_to(ROOT)) not in SERVING_GLUE
        for name in _imports(path)
        if name.split(".")[0] in LAYER and name.split(".")[0] != "inference"
    ]
    assert not outside, outside


@pytest.mark.unit
def test_routers_never_import_routers():
    found = {
        (str(path.relative_to(ROOT)), name)
        for path in _files("api/routers")
        for name in _imports(path)
        if name.startswith("api.routers")
    }
    assert not found, found
