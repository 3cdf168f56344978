"""The OpenAI-compatible HTTP front-end of an engine."""

from __future__ import annotations

from fastapi import FastAPI

from inference.metrics import ServingMetrics
from inference.protocol import EngineClient
from inference.server.deps import ServerContext
from inference.server.errors import install_error_handlers
from inference.server.routes import chat, completions, models, ops


def create_app(engine: EngineClient, served_model_name: str) -> FastAPI:
    """An app serving `engine` under `served_model_name`; the caller owns the engine's lifecycle."""
    app = FastAPI(title="Groundwork inference server", version="1")
    metrics = ServingMetrics(engine)
    app.state.context = ServerContext(engine=engine, model_name=served_model_name, metrics=metrics)
    install_error_handlers(app)
    for module in (models, completions, chat, ops):
        app.include_router(module.router)
    return app
