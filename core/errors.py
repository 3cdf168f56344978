"""The error a use case raises for its caller to fix, with a stable machine-readable code; the API
answers it with its `status` and JSON shape (api/errors.py), MCP tools as a tool error."""

from __future__ import annotations

from typing import Any


class ClientError(Exception):
    def __init__(
        self, status: int, code: str, message: str, details: Any = None, headers: dict | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details, self.headers = (
            status,
            code,
            message,
            details,
            headers,
        )
