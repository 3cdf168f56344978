"""Every failure leaves the server in OpenAI's error shape: `{"error": {message, type, param, code}}`."""

from __future__ import annotations

import logging
import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from inference.protocol import EngineOverloadedError, InvalidRequestError
from inference.server.schemas.common import ErrorDetail, ErrorResponse

log = logging.getLogger(__name__)


class APIError(Exception):
    """An error raised by a route, rendered as-is."""

    def __init__(
        self,
        message: str,
        status_code: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.detail = ErrorDetail(message=message, type=type, param=param, code=code)


def error_payload(message: str, type: str, param: str | None = None, code: str | None = None) -> dict:
    """The JSON body of an error, also sent as the last event of a stream that fails midway."""
    return ErrorResponse(error=ErrorDetail(message=message, type=type, param=param, code=code)).model_dump()


def _response(status: int, detail: ErrorDetail, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(ErrorResponse(error=detail).model_dump(), status_code=status, headers=headers)


def _validation_param(loc: tuple) -> str | None:
    # `loc` starts with where the value came from ("body", "query"); the rest is the field path.
    if loc and loc[0] in ("body", "query", "path"):
        loc = loc[1:]
    return ".".join(str(part) for part in loc) or None


def _validation_message(error: dict) -> str:
    # Our own validators' messages are meant for users; drop pydantic's "Value error, " prefix.
    own = error.get("ctx", {}).get("error") if error.get("type") == "value_error" else None
    where = _validation_param(tuple(error.get("loc", ()))) or "body"
    return f"{where}: {own or error.get('msg')}"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return _response(exc.status_code, exc.detail)

    @app.exception_handler(InvalidRequestError)
    async def _invalid(_: Request, exc: InvalidRequestError) -> JSONResponse:
        return _response(400, ErrorDetail(message=str(exc), type="invalid_request_error"))

    @app.exception_handler(EngineOverloadedError)
    async def _overloaded(_: Request, exc: EngineOverloadedError) -> JSONResponse:
        retry_after = str(max(1, math.ceil(exc.retry_after_s)))
        detail = ErrorDetail(message=str(exc), type="server_overloaded", code="engine_overloaded")
        return _response(503, detail, headers={"Retry-After": retry_after})

    @app.exception_handler(RequestValidationError)
    async def _malformed(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        param = _validation_param(tuple(first.get("loc", ())))
        message = "; ".join(_validation_message(error) for error in errors)
        return _response(
            400, ErrorDetail(message=message or "invalid request", type="invalid_request_error", param=param)
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        detail = ErrorDetail(message=str(exc.detail), type=kind)
        return _response(exc.status_code, detail, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error while serving a request")
        return _response(500, ErrorDetail(message=f"internal error: {exc}", type="internal_server_error"))
