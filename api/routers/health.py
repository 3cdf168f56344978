"""Liveness and readiness."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from api.deps import StateDep
from api.schemas.common import ErrorBody
from core.database import DatabaseNotReady, check_migrated
from core.registry import ModelNotAvailable, resolve_model
from ingestion.liveness import workers_alive

router = APIRouter(tags=["health"])
log = logging.getLogger(__name__)


class ReadyOut(BaseModel):
    status: str
    checks: dict[str, str]


@router.get("/healthz")
def healthz() -> dict:
    """The process is up."""
    return {"status": "ok"}


def _check_database(state) -> str:
    check_migrated(state.engine)
    return "ok"


def _check_broker(state) -> str:
    with state.celery.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
    return "ok"


class WorkerMissing(Exception):
    pass


def _check_worker(state) -> str:
    if not workers_alive(state.engine, state.settings.celery_queue):
        raise WorkerMissing
    return "ok"


def _check_models(state) -> str:
    for spec in (state.settings.embedding_model, state.settings.llm_model):
        resolve_model(spec, state.settings.hf_offline, state.settings.model_cache_dir)
    return "ok"


@router.get("/readyz", response_model=ReadyOut, responses={503: {"model": ErrorBody}})
async def readyz(state: StateDep) -> JSONResponse:
    """Database migrated and reachable, broker reachable, a worker alive, configured models resolvable."""
    checks = {
        "database": _check_database,
        "broker": _check_broker,
        "worker": _check_worker,
        "models": _check_models,
    }
    results: dict[str, str] = {}
    for name, check in checks.items():
        try:
            results[name] = await asyncio.to_thread(check, state)
        except DatabaseNotReady as exc:  # our own message: what to run (e.g. `groundwork db upgrade`)
            results[name] = f"error: {exc}"
        except WorkerMissing:
            results[name] = "error: no worker is running for this queue (start one: groundwork worker)"
        except ModelNotAvailable:
            log.warning("readyz: %s not ready", name, exc_info=True)
            results[name] = "error: a configured model cannot be loaded (details in the server log)"
        except Exception:  # any failure to reach a dependency is "not ready"; the text stays in the log
            log.warning("readyz: %s not ready", name, exc_info=True)
            results[name] = "error: unreachable (details in the server log)"
    ready = all(v == "ok" for v in results.values())
    if ready:
        return JSONResponse({"status": "ready", "checks": results})
    body = {"error": {"code": "not_ready", "message": "a dependency is not ready", "details": results}}
    return JSONResponse(status_code=503, content=body, headers={"Retry-After": "5"})
