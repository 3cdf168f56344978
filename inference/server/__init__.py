"""OpenAI-compatible server (/v1/models, /v1/completions, /v1/chat/completions, /metrics)."""

from inference.server.app import create_app

__all__ = ["create_app"]
