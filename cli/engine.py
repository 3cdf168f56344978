"""`groundwork engine serve | generate`: our inference engine on its own, without the platform."""

from __future__ import annotations

import asyncio
import enum
import sys
import uuid

import typer
import uvicorn

from core.registry import ModelNotAvailable, resolve_model
from core.settings import Settings, get_settings
from core.telemetry import configure_logging

app = typer.Typer(help="Groundwork's own inference engine.", no_args_is_help=True)


class ToolCallFormat(enum.StrEnum):
    json = "json"
    python = "python"


MODEL_HELP = "Model spec: packaged name, GGUF file or HF directory, or hub id (default: settings.llm_model)."


def _load_engine(spec: str | None, settings: Settings):
    # NOTE: imported here so that `groundwork --help` and other commands do not pay for torch.
    from inference.async_engine import AsyncLLMEngine

    spec = spec or settings.llm_model
    try:
        resolved = resolve_model(spec, settings.hf_offline, settings.model_cache_dir)
    except ModelNotAvailable as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    return AsyncLLMEngine.from_settings(settings, resolved.path, model_name=spec)


@app.command()
def serve(
    model: str = typer.Option(None, "--model", help=MODEL_HELP),
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8001, help="Port to listen on (the platform API uses settings.api_port)."),
    api_key: str = typer.Option(
        None, "--api-key", envvar="GROUNDWORK_ENGINE_API_KEY", help="Require this bearer key on /v1 routes."
    ),
    tool_call_format: ToolCallFormat = typer.Option(
        "json",
        "--tool-call-format",
        help="How the model writes the calls of chat requests with tools: <tool_call> JSON blocks, or a "
        "Python call list (the layout Qwen2.5 models were measured in; agents/README.md).",
    ),
    tool_relevance: float | None = typer.Option(
        None,
        "--tool-relevance",
        min=0.0,
        max=1.0,
        help="Under tool_choice auto, first ask the model whether one of the tools fits the user's "
        "request, and answer in text without them when its P(yes) is under this (0.7 for "
        "qwen2.5-coder-1.5b in the python layout; the 0.5B's answer tells nothing; "
        "inference/tool_relevance.py). Unset: never asked.",
    ),
) -> None:
    """Serve the model over an OpenAI-compatible API (/v1/chat/completions, /v1/completions, /metrics)."""
    from inference.server import create_app

    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    engine = _load_engine(model, settings)
    engine.start()
    try:
        app = create_app(
            engine,
            engine.model_name,
            api_key=api_key,
            tool_call_format=tool_call_format.value,
            tool_relevance=tool_relevance,
        )
        uvicorn.run(app, host=host, port=port, log_config=None)
    finally:
        engine.shutdown()


@app.command()
def generate(
    prompt: str = typer.Argument(..., help="The user message (or raw prompt with --no-chat)."),
    model: str = typer.Option(None, "--model", help=MODEL_HELP),
    max_tokens: int = typer.Option(256, help="Most tokens to generate."),
    temperature: float = typer.Option(0.7, help="0 = greedy."),
    chat: bool = typer.Option(True, "--chat/--no-chat", help="Wrap the prompt in the model's chat template."),
) -> None:
    """Generate from one prompt, streaming the text to stdout."""
    from inference.protocol import EngineError, SamplingParams

    settings = get_settings()
    configure_logging("WARNING", json_logs=False)
    engine = _load_engine(model, settings)
    params = SamplingParams(max_tokens=max_tokens, temperature=temperature)

    async def stream() -> None:
        if chat:
            prompt_ids = engine.apply_chat_template([{"role": "user", "content": prompt}])
        else:
            prompt_ids = engine.encode(prompt)
        async for output in engine.generate(uuid.uuid4().hex, prompt_ids, params):
            sys.stdout.write(output.new_text)
            sys.stdout.flush()
        sys.stdout.write("\n")

    engine.start()
    try:
        asyncio.run(stream())
    except EngineError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(1) from None
    finally:
        engine.shutdown()
