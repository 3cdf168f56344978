import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from tests.api.qa_corpus import DOCS
from tests.ingestion.helpers import create_collection, upload, wait_job


@pytest.fixture(scope="session")
def client(broker_settings):
    """The API on the session's database with Redis as broker, lifespan run."""
    with TestClient(create_app(broker_settings)) as c:
        yield c


@pytest.fixture(scope="session")
def qa_collection(client, celery_worker) -> str:
    """The QA corpus ingested by the real worker into collection `qa-docs`."""
    create_collection(client, "qa-docs")
    job = wait_job(client, upload(client, "qa-docs", DOCS)["job_id"])
    assert job["documents_done"] == len(DOCS), job
    return "qa-docs"
