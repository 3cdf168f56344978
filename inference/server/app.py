"""The OpenAI-compatible HTTP front-end of an engine."""

from __future__ import annotations

import hmac

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from inference.grammar.spec import ToolFormat
from inference.metrics import ServingMetrics
from inference.protocol import EngineClient
from inference.server.deps import ServerContext
from inference.server.errors import error_payload, install_error_handlers
from inference.server.routes import chat, completions, models, ops


def create_app(
    engine: EngineClient,
    served_model_name: str,
    api_key: str | None = None,
    tool_call_format: ToolFormat = "json",
    tool_relevance: float | None = None,
) -> FastAPI:
    """An app serving `engine` under `served_model_name`; the caller owns the engine's lifecycle.
    With `api_key`, every /v1 route needs `Authorization: Bearer <api_key>` (as vLLM's --api-key).
    `tool_call_format`: how the model writes the calls of chat requests with `tools` (both layouts
    answer in OpenAI's `tool_calls`). `tool_relevance`: a chat turn with `tools` under tool_choice
    "auto" goes without them when the model's P(yes) that one fits is under it (tool_relevance.py)."""
    app = FastAPI(title="Groundwork inference server", version="1")
    metrics = ServingMetrics(engine)
    app.state.context = ServerContext(
        engine=engine,
        model_name=served_model_name,
        metrics=metrics,
        tool_call_format=tool_call_format,
        tool_relevance=tool_relevance,
    )
    install_error_handlers(app)
    for module in (models, completions, chat, ops):
        app.include_router(module.router)
    if api_key:
        expected = f"Bearer {api_key}".encode()

        @app.middleware("http")
        async def _require_key(request: Request, call_next):
            given = request.headers.get("authorization", "").encode()
            if request.url.path.startswith("/v1") and not hmac.compare_digest(given, expected):
                body = error_payload(
                    "invalid or missing API key", "authentication_error", code="invalid_api_key"
                )
                return JSONResponse(status_code=401, content=body, headers={"WWW-Authenticate": "Bearer"})
            return await call_next(request)

    return app
