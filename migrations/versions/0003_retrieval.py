"""Retrieval: BM25 postings maintained by triggers on `chunks`, and text-search configurations.

The BM25 index lives in Postgres so that every API replica and worker sees exactly what is
committed. Statement-level triggers on `chunks` keep it in the same transaction as the chunk
writes, so ingestion needs no call at all (see retrieval/README.md).

Revision ID: 0003_retrieval
Revises: 0002_ingestion

"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003_retrieval"
down_revision: str | Sequence[str] | None = "0002_ingestion"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Stemming and stop words are chosen per collection by naming a text-search configuration:
# english (stem + stop words, the default), simple (neither), and the two mixes below.
CONFIGS = """
CREATE TEXT SEARCH DICTIONARY groundwork_english_stem_nostop (TEMPLATE = snowball, Language = english);
CREATE TEXT SEARCH CONFIGURATION groundwork_english_nostop (COPY = english);
ALTER TEXT SEARCH CONFIGURATION groundwork_english_nostop
    ALTER MAPPING REPLACE english_stem WITH groundwork_english_stem_nostop;
CREATE TEXT SEARCH DICTIONARY groundwork_simple_stop (TEMPLATE = simple, StopWords = english);
CREATE TEXT SEARCH CONFIGURATION groundwork_simple_stop (COPY = simple);
ALTER TEXT SEARCH CONFIGURATION groundwork_simple_stop
    ALTER MAPPING REPLACE simple WITH groundwork_simple_stop;
"""

TABLES = """
CREATE TABLE bm25_postings (
    collection_id uuid NOT NULL,
    term text NOT NULL,
    chunk_id uuid NOT NULL,
    tf integer NOT NULL,
    -- NOTE: the chunk's length is copied into each of its postings so that scoring a term reads
    -- one index and nothing else (index-only scan); it never changes while the chunk lives.
    dl integer NOT NULL,
    PRIMARY KEY (collection_id, term, chunk_id) INCLUDE (tf, dl)
);
CREATE INDEX ix_bm25_postings_chunk ON bm25_postings (chunk_id);
CREATE TABLE bm25_stats (
    collection_id uuid PRIMARY KEY REFERENCES collections (id) ON DELETE CASCADE,
    n_chunks bigint NOT NULL,
    total_len bigint NOT NULL
);
"""

FUNCTIONS = """
-- The tokenizer, used at index and at query time: ASCII punctuation becomes a space (so codes
-- like ERR-4471 or a.b@c.io split into plain words, the same way everywhere), then Postgres'
-- Unicode-aware text-search parser lower-cases and (per configuration) stems and drops stop
-- words. tf = occurrences of the lexeme.
CREATE FUNCTION groundwork_bm25_terms(cfg regconfig, body text)
RETURNS TABLE (term text, tf integer) LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lexeme, coalesce(array_length(positions, 1), 1)
    FROM unnest(to_tsvector(cfg, regexp_replace(body, '[[:punct:]]+', ' ', 'g')))
$$;

CREATE FUNCTION groundwork_bm25_config(settings jsonb) RETURNS regconfig
LANGUAGE sql STABLE AS $$
    SELECT coalesce(settings #>> '{bm25,text_config}', 'english')::regconfig
$$;

CREATE FUNCTION groundwork_bm25_add(ids uuid[]) RETURNS void LANGUAGE sql AS $$
    WITH t AS (
        SELECT c.collection_id, c.id AS chunk_id, x.term, x.tf,
               sum(x.tf) OVER (PARTITION BY c.id) AS dl
        FROM chunks c
        JOIN collections col ON col.id = c.collection_id
        CROSS JOIN LATERAL groundwork_bm25_terms(groundwork_bm25_config(col.retrieval), c.text) x
        WHERE c.id = ANY (ids)
    ), ins AS (
        INSERT INTO bm25_postings (collection_id, term, chunk_id, tf, dl)
        SELECT collection_id, term, chunk_id, tf, dl FROM t
    ), lens AS (
        SELECT collection_id, sum(tf) AS len FROM t GROUP BY collection_id
    )
    INSERT INTO bm25_stats AS s (collection_id, n_chunks, total_len)
    SELECT c.collection_id, count(*), coalesce(max(lens.len), 0)
    FROM chunks c LEFT JOIN lens ON lens.collection_id = c.collection_id
    WHERE c.id = ANY (ids) GROUP BY c.collection_id
    ON CONFLICT (collection_id) DO UPDATE
        SET n_chunks = s.n_chunks + excluded.n_chunks, total_len = s.total_len + excluded.total_len;
$$;

CREATE FUNCTION groundwork_bm25_remove(ids uuid[], collection_ids uuid[]) RETURNS void
LANGUAGE sql AS $$
    WITH d AS (
        DELETE FROM bm25_postings p WHERE p.chunk_id = ANY (ids) RETURNING p.collection_id, p.tf
    ), lens AS (
        SELECT collection_id, sum(tf) AS len FROM d GROUP BY collection_id
    ), gone AS (
        SELECT collection_id, count(*) AS n FROM unnest(collection_ids) AS u (collection_id)
        GROUP BY collection_id
    )
    UPDATE bm25_stats s SET n_chunks = s.n_chunks - g.n, total_len = s.total_len - coalesce(l.len, 0)
    FROM gone g LEFT JOIN lens l ON l.collection_id = g.collection_id
    WHERE s.collection_id = g.collection_id;
$$;

CREATE FUNCTION groundwork_bm25_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM groundwork_bm25_add(ARRAY(SELECT id FROM new_rows));
    RETURN NULL;
END $$;

CREATE FUNCTION groundwork_bm25_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM groundwork_bm25_remove(ARRAY(SELECT id FROM old_rows), ARRAY(SELECT collection_id FROM old_rows));
    RETURN NULL;
END $$;

CREATE FUNCTION groundwork_bm25_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed_ids uuid[];
    changed_collections uuid[];
BEGIN
    SELECT array_agg(o.id), array_agg(o.collection_id) INTO changed_ids, changed_collections
    FROM old_rows o JOIN new_rows n ON n.id = o.id
    WHERE o.text IS DISTINCT FROM n.text OR o.collection_id IS DISTINCT FROM n.collection_id;
    IF changed_ids IS NOT NULL THEN
        PERFORM groundwork_bm25_remove(changed_ids, changed_collections);
        PERFORM groundwork_bm25_add(changed_ids);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION groundwork_bm25_on_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE bm25_postings, bm25_stats;
    RETURN NULL;
END $$;

-- Rebuild one collection's postings, e.g. after its text-search configuration changed.
CREATE FUNCTION groundwork_bm25_reindex(cid uuid) RETURNS void LANGUAGE sql AS $$
    DELETE FROM bm25_postings WHERE collection_id = cid;
    DELETE FROM bm25_stats WHERE collection_id = cid;
    SELECT groundwork_bm25_add(ARRAY(SELECT id FROM chunks WHERE collection_id = cid));
$$;

CREATE TRIGGER groundwork_bm25_insert AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION groundwork_bm25_on_insert();
CREATE TRIGGER groundwork_bm25_delete AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION groundwork_bm25_on_delete();
CREATE TRIGGER groundwork_bm25_update AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION groundwork_bm25_on_update();
CREATE TRIGGER groundwork_bm25_truncate AFTER TRUNCATE ON chunks
    FOR EACH STATEMENT EXECUTE FUNCTION groundwork_bm25_on_truncate();
"""

DROP = """
DROP TRIGGER IF EXISTS groundwork_bm25_truncate ON chunks;
DROP TRIGGER IF EXISTS groundwork_bm25_update ON chunks;
DROP TRIGGER IF EXISTS groundwork_bm25_delete ON chunks;
DROP TRIGGER IF EXISTS groundwork_bm25_insert ON chunks;
DROP FUNCTION IF EXISTS groundwork_bm25_reindex(uuid), groundwork_bm25_on_truncate(),
    groundwork_bm25_on_update(), groundwork_bm25_on_delete(), groundwork_bm25_on_insert(),
    groundwork_bm25_remove(uuid[], uuid[]), groundwork_bm25_add(uuid[]),
    groundwork_bm25_config(jsonb), groundwork_bm25_terms(regconfig, text);
DROP TABLE IF EXISTS bm25_stats, bm25_postings;
DROP TEXT SEARCH CONFIGURATION IF EXISTS groundwork_simple_stop, groundwork_english_nostop;
DROP TEXT SEARCH DICTIONARY IF EXISTS groundwork_simple_stop, groundwork_english_stem_nostop;
"""


def upgrade() -> None:
    op.execute(CONFIGS)
    op.execute(TABLES)
    op.execute(FUNCTIONS)
    # Chunks written before this migration get their postings now.
    op.execute("SELECT groundwork_bm25_add(ARRAY(SELECT id FROM chunks))")


def downgrade() -> None:
    op.execute(DROP)
