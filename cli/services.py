"""`groundwork up | api | worker`: run the platform's processes."""

from __future__ import annotations

import os
import signal
import sys
import threading

import typer
import uvicorn

from cli.db import upgrade_database
from cli.demo import seed_demo
from cli.supervise import SupervisedWorker
from core.database import DatabaseNotReady
from core.registry import ModelNotAvailable, resolve_model
from core.runtime import DatabaseHandle, open_database
from core.settings import Settings, get_settings
from core.telemetry import configure_logging
from inference.provider import in_process
from ingestion.celery_app import broker_urls, create_celery, prepare_broker_tables


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(2)


def serve_api(settings: Settings, database: DatabaseHandle, preload_engine: bool = False) -> None:
    from api.main import build_state, create_app

    try:
        state = build_state(settings, database)
    except DatabaseNotReady as exc:
        _fail(str(exc))
    if preload_engine and in_process(settings):
        # Load the generator while the API starts, so that the first question does not wait for it.
        threading.Thread(target=state.llm.local_engine, daemon=True).start()
    # NOTE: uvicorn re-raises SIGTERM after its graceful shutdown; exiting through SystemExit
    # instead lets callers' `finally` blocks stop the worker and the embedded database.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(create_app(settings, state), host=settings.api_host, port=settings.api_port, log_config=None)


def api() -> None:
    """Run the API (the database must be migrated)."""
    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    database = open_database(settings, supervise=True)
    try:
        serve_api(settings, database)
    finally:
        database.close()


def worker(
    concurrency: int = typer.Option(None, help="Worker processes (default: settings.worker_concurrency)."),
) -> None:
    """Run a Celery worker consuming the platform's queue."""
    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    database = open_database(settings, supervise=True)
    prepare_broker_tables(*broker_urls(settings, database.url))
    app = create_celery(settings, database.url)
    try:
        app.worker_main(
            [
                "worker",
                f"--loglevel={settings.log_level}",
                f"--concurrency={concurrency or settings.worker_concurrency}",
                f"--queues={settings.celery_queue}",
                "--without-gossip",
                "--without-mingle",
            ]
        )
    finally:
        database.close()


def _seed_demo_quietly(url: str, auth_required: bool) -> None:
    try:
        seed_demo(url, auth_required)
    except Exception as exc:  # the platform runs on without its demo
        typer.secho(f"demo corpus not ingested: {type(exc).__name__}: {exc}", fg="yellow", err=True)


def up(
    llm: str = typer.Option(
        None, "--llm", help="Generator for this run: a packaged or pulled model name, GGUF path or hub id."
    ),
    replicas: int = typer.Option(
        0,
        "--replicas",
        help="Start N local engines (vLLM servers with engine.backend=vllm) behind the router.",
    ),
) -> None:
    """Start everything on this machine: database (embedded unless configured), model servers
    (vLLM, replicas) when configured, worker, API."""
    from cli.llm_servers import start_model_servers
    from inference.supervisor import ServerFailed
    from inference.vllm_server import VLLMNotInstalled

    if llm:
        os.environ["GROUNDWORK_LLM_MODEL"] = llm  # before settings load: the worker inherits it too
    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    if not settings.engine.llm_base_url:
        try:  # a model that is not here fails now, with what to run, not at the first question
            resolve_model(settings.llm_model, settings.hf_offline, settings.model_cache_dir)
        except ModelNotAvailable as exc:
            _fail(str(exc))
    try:
        models = start_model_servers(settings, replicas)
    except (ServerFailed, VLLMNotInstalled) as exc:
        _fail(str(exc))
    settings = models.settings
    try:
        database = open_database(settings, supervise=True)
        upgrade_database(database.url)
    except DatabaseNotReady as exc:
        models.stop()
        _fail(str(exc))
    prepare_broker_tables(*broker_urls(settings, database.url))
    env = {**os.environ, **models.env, "GROUNDWORK_DATABASE_URL": database.url}
    worker = SupervisedWorker(
        [sys.executable, "-m", "cli.main", "worker"], env, settings.data_dir / "worker.pid"
    ).start()
    url = f"http://{settings.api_host}:{settings.api_port}"
    typer.secho(f"Groundwork is starting at {url}  (readiness: {url}/readyz, docs: {url}/docs)", fg="green")
    typer.secho(f"Admin UI: {url}/ui/", fg="green")
    threading.Thread(target=_seed_demo_quietly, args=(url, settings.auth_required), daemon=True).start()
    try:
        serve_api(settings, database, preload_engine=True)
    finally:
        worker.stop()
        models.stop()
        database.close()
