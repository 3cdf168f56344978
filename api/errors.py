"""One JSON error shape for every 4xx/5xx: {"error": {"code", "message", "details"}}."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from core.database import DatabaseNotReady
from core.errors import ClientError
from core.quotas import QuotaExceeded
from inference.protocol import EngineOverloadedError, InvalidRequestError

log = logging.getLogger(__name__)

# How long clients wait before retrying while the database is unreachable (a restart takes seconds).
DATABASE_RETRY_AFTER_S = 5


# The routers' name for it: raise from routes for a client-facing error.


def error_response(status: int, code: str, message: str, details: Any = None, headers=None) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "details": details}}
    return JSONResponse(status_code=status, content=body, headers=headers)


def _code_for(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_")
    except ValueError:
        return "error"


def is_database_outage(exc: BaseException) -> bool:
    """The database is down or refusing connections (not a bad query)."""
    if isinstance(exc, OperationalError | PoolTimeoutError | DatabaseNotReady):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def classify(exc: BaseException) -> ClientError:
    """The client-facing error for any exception a route or a stream raises; details go to the logs."""
    if isinstance(exc, ClientError):
        return exc
    if isinstance(exc, InvalidRequestError):
        return ClientError(400, "invalid_request", str(exc))
    if isinstance(exc, QuotaExceeded):
        return ClientError(413, "quota_exceeded", str(exc))
    if isinstance(exc, RecursionError):
        # NOTE: input nested past what a parser or validator recurses through; the client's to fix.
        return ClientError(400, "too_deeply_nested", "a value in the request is nested too deeply")
    if isinstance(exc, DataError):
        # NOTE: Postgres refused a value the request carried (a NUL byte in text, a number out of its
        # column's range) that validation let through: the client's input, so a 400 that says why.
        reason = str(exc.orig or exc).splitlines()[0]
        return ClientError(
            400, "invalid_value", f"a value in the request cannot be stored or compared: {reason}"
        )
    if isinstance(exc, EngineOverloadedError):
        retry = max(1, round(exc.retry_after_s))
        return ClientError(
            503,
            "engine_overloaded",
            "the generator is at capacity; retry later",
            headers={"Retry-After": str(retry)},
        )
    if is_database_outage(exc):
        log.warning("database unavailable: %s: %s", type(exc).__name__, exc)
        return ClientError(
            503,
            "database_unavailable",
            "the database is unavailable; retry later",
            headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
        )
    log.error("unhandled error", exc_info=exc)
    return ClientError(500, "internal_error", f"internal error: {type(exc).__name__}")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ClientError)
    async def _api_error(_: Request, exc: ClientError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else _code_for(exc.status_code)
        details = None if isinstance(exc.detail, str) else exc.detail
        code = getattr(exc, "code", None) or _code_for(exc.status_code)
        return error_response(exc.status_code, code, message, details, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"])
        return error_response(422, "validation_error", f"{where}: {first['msg']}", errors)

    @app.exception_handler(Exception)
    async def _classified(_: Request, exc: Exception) -> JSONResponse:
        err = classify(exc)
        return error_response(err.status, err.code, err.message, err.details, err.headers)

    # NOTE: registered by class too, so that they are answered inside the middleware stack (with
    # the request id header) instead of by Starlette's outermost server-error handler.
    for kind in (
        InvalidRequestError,
        QuotaExceeded,
        RecursionError,
        EngineOverloadedError,
        OperationalError,
        DBAPIError,
        PoolTimeoutError,
        DatabaseNotReady,
    ):
        app.add_exception_handler(kind, _classified)
