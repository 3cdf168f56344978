"""No lost work: a job whose enqueue failed after its commit is sent by the reaper (outbox flag),
and delivered broker rows are purged."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from core.database import session_scope
from core.models import Collection, IngestionJob
from ingestion.blobs import BlobStore
from ingestion.recovery import purge_broker_rows, recover
from ingestion.uploads import Upload, create_batch, send_job

pytestmark = pytest.mark.integration


# The columns of kombu's SQLAlchemy transport that matter here (kombu creates them lazily, with ids
# from client-side sequences: the inserts below give their own).
KOMBU_TABLES = """
CREATE TABLE IF NOT EXISTS kombu_queue (id serial PRIMARY KEY, name varchar(200) UNIQUE);
CREATE TABLE IF NOT EXISTS kombu_message (
    id serial PRIMARY KEY, visible boolean, timestamp timestamp, payload text NOT NULL,
    version smallint NOT NULL, queue_id integer REFERENCES kombu_queue (id)
);
"""


class BrokenBroker:
    def send_task(self, *args, **kwargs):
        raise ConnectionError("broker down")


def test_a_failed_enqueue_is_sent_by_the_reaper(settings, session_factory, make_collection):
    with session_scope(session_factory) as session:
        collection = session.get(Collection, make_collection())
        uploads = [Upload(f"{i}.txt", f"text {i}".encode()) for i in range(3)]
        batch = create_batch(session, BlobStore.for_data_dir(settings.data_dir), collection, uploads, 10**6)
    job_id, queued = batch.job.id, set(batch.queued)
    assert send_job(BrokenBroker(), session_factory, settings, job_id, batch.queued) is False
    sent: list = []
    with session_scope(session_factory) as session:
        assert session.get(IngestionJob, job_id).enqueued_at is None
    recover(session_factory, lambda j, ids: sent.append((j, set(ids))), 3600, 3, outbox_grace_s=0)
    assert (job_id, queued) in sent
    with session_scope(session_factory) as session:
        assert session.get(IngestionJob, job_id).enqueued_at is not None
    again: list = []
    recover(session_factory, lambda j, ids: again.append(j), 3600, 3, outbox_grace_s=0)
    assert job_id not in again  # sent once, not on every pass


def test_delivered_broker_rows_are_purged(session_factory):
    with session_scope(session_factory) as session:
        session.execute(text(KOMBU_TABLES))
        queue = session.execute(
            text(
                "INSERT INTO kombu_queue (id, name) SELECT coalesce(max(id), 0) + 1, 'purge-test' "
                "FROM kombu_queue ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id"
            )
        ).scalar()
        for visible, age in ((False, "2 hours"), (False, "1 minute"), (True, "2 hours")):
            session.execute(
                text(
                    "INSERT INTO kombu_message (id, visible, timestamp, payload, version, queue_id) "
                    "SELECT coalesce(max(id), 0) + 1, :v, now() - CAST(:age AS interval), 'x', 1, :q "
                    "FROM kombu_message"
                ),
                {"v": visible, "age": age, "q": queue},
            )
    assert purge_broker_rows(session_factory, 3600) >= 1
    with session_scope(session_factory) as session:
        left = session.execute(text("SELECT visible FROM kombu_message WHERE queue_id = :q"), {"q": queue})
        assert sorted(left.scalars()) == [False, True]  # the recent delivered one and the pending one
