"""Pydantic models of the OpenAI-compatible API, one module per resource."""
