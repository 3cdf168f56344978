import pytest

from core.settings import Settings

pytestmark = pytest.mark.unit


def test_env_overrides_toml_and_nested_sections(tmp_path, monkeypatch):
    toml = tmp_path / "groundwork.toml"
    toml.write_text('api_port = 9001\ncelery_queue = "from-toml"\n[engine]\nblock_size = 32\n')
    monkeypatch.setenv("GROUNDWORK_CONFIG", str(toml))
    monkeypatch.setenv("GROUNDWORK_CELERY_QUEUE", "from-env")
    monkeypatch.setenv("GROUNDWORK_ENGINE__MAX_NUM_SEQS", "7")
    s = Settings()
    assert s.api_port == 9001
    assert s.celery_queue == "from-env"
    assert s.engine.block_size == 32 and s.engine.max_num_seqs == 7
