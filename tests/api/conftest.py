import pytest
from fastapi.testclient import TestClient

from api.main import create_app


@pytest.fixture(scope="session")
def client(broker_settings):
    """The API on the session's database with Redis as broker, lifespan run."""
    with TestClient(create_app(broker_settings)) as c:
        yield c
