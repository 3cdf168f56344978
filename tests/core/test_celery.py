"""A real worker executes tasks through a real broker: Redis, and the embedded SQLAlchemy transport."""

import pytest

from ingestion.celery_app import create_celery
from tests.support.services import WorkerProcess, unique_name

pytestmark = pytest.mark.integration


def test_worker_executes_task_through_redis(celery_worker, celery_app):
    result = celery_app.send_task("groundwork.health")
    payload = result.get(timeout=60)
    assert payload["ok"] is True
    assert payload["pid"] != __import__("os").getpid()


def test_worker_executes_task_through_embedded_sqlalchemy_broker(settings, database_url, tmp_path):
    embedded = settings.model_copy(update={"celery_queue": unique_name("gwq_sqla")})
    app = create_celery(embedded, database_url)
    assert app.conf.broker_url.startswith("sqla+postgresql")
    worker = WorkerProcess(embedded, database_url, tmp_path / "worker.log")
    worker.start()
    try:
        worker.wait_ready(app, timeout=120)
        assert app.send_task("groundwork.health").get(timeout=60)["ok"] is True
    finally:
        worker.stop()
