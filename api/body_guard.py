"""What is refused before a request body is read: bodies over the JSON cap (413), and requests
without credentials where a key is required (401).

FastAPI reads and parses a route's body before it runs the route's dependencies, authentication
included: an unauthenticated 200 MB JSON body cost 540 MB of API memory before its 401. This
ASGI middleware answers from the headers instead, and counts the bytes of bodies sent without a
length. Multipart uploads are not capped here: they stream to disk, and ingestion bounds them
(max_file_mb, max_files_per_upload). Every /v1 route takes a key (the public routes, /healthz,
/readyz, /metrics and /ui, are outside /v1; a test holds the API to it).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.deps import unauthorized
from api.errors import error_response
from core.settings import Settings

_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class BodyTooLarge(HTTPException):
    code = "body_too_large"

    def __init__(self, cap: int) -> None:
        super().__init__(413, f"request bodies are limited to {cap} bytes (limits.max_json_body_mb)")


class BodyGuard:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app, self.settings = app, settings
        self.cap = int(settings.limits.max_json_body_mb * 1_000_000)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _WITH_BODY:
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if (
            self.settings.auth_required
            and "authorization" not in headers
            and scope["path"].startswith("/v1/")
        ):
            error = unauthorized("an API key is required: Authorization: Bearer <key>")
            response = error_response(error.status, error.code, error.message, headers=error.headers)
            return await response(scope, receive, send)
        if headers.get("content-type", "").startswith("multipart/form-data"):
            return await self.app(scope, receive, send)
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.cap:
            error = BodyTooLarge(self.cap)
            response = error_response(413, error.code, error.detail)
            return await response(scope, receive, send)
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.cap:  # a body sent without a length (chunked), or longer than it
                raise BodyTooLarge(self.cap)
            return message

        await self.app(scope, counted, send)
