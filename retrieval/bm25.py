"""BM25 over a collection's postings in Postgres, exact and computed by one SQL statement.

The postings (`bm25_postings`, `bm25_stats`) are written by triggers on `chunks` in the transaction
that writes the chunks, with the tokenizer `groundwork_bm25_terms` that this query also applies
to the query text; see migrations/versions/0003_retrieval.py and retrieval/README.md.
"""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.orm import Session

from core.settings.retrieval import BM25Config
from core.tracing import traced
from retrieval.filters import SearchFilters
from retrieval.types import Hit, ranked

_LUCENE_IDF = "ln(1 + (st.n - p.df + 0.5) / (p.df + 0.5))"
# rank-bm25's BM25Okapi: negative idfs (terms in more than half the chunks) become epsilon times
# the mean idf over the whole vocabulary. NOTE: that mean is an uncorrelated scalar subquery, so
# Postgres evaluates it lazily, only when some query term's idf is negative.
_OKAPI_IDF = (
    "CASE WHEN ln((st.n - p.df + 0.5) / (p.df + 0.5)) < 0 "
    "THEN CAST(:epsilon AS float8) * (SELECT avg_idf FROM vocab) "
    "ELSE ln((st.n - p.df + 0.5) / (p.df + 0.5)) END"
)

_SQL = """
WITH q AS (
    SELECT t.term, t.tf::float8 AS qtf
    FROM collections col, groundwork_bm25_terms(groundwork_bm25_config(col.retrieval), :query) t
    WHERE col.id = :cid
), st AS (
    SELECT n_chunks::float8 AS n, total_len::float8 / greatest(n_chunks, 1) AS avgdl,
           CAST(:k1 AS float8) AS k1, CAST(:b AS float8) AS b
    FROM bm25_stats WHERE collection_id = :cid
), vocab AS (
    SELECT avg(ln((st.n - v.df + 0.5) / (v.df + 0.5))) AS avg_idf
    FROM (SELECT count(*) AS df FROM bm25_postings WHERE collection_id = :cid GROUP BY term) v, st
), p AS (
    SELECT p.chunk_id, p.tf, p.dl, q.qtf, count(*) OVER (PARTITION BY p.term) AS df
    FROM bm25_postings p JOIN q ON p.term = q.term
    WHERE p.collection_id = :cid
), s AS (
    SELECT p.chunk_id,
           sum(p.qtf * {idf} * p.tf * (st.k1 + 1) / (p.tf + st.k1 * (1 - st.b + st.b * p.dl / st.avgdl)))
           AS score
    FROM p CROSS JOIN st
    GROUP BY p.chunk_id
)
SELECT s.chunk_id, s.score FROM s {join}
ORDER BY s.score DESC, s.chunk_id
LIMIT :limit
"""


class BM25Retriever:
    """Sparse retrieval: exact BM25 (Lucene or Okapi variant) over one collection.

    Filters restrict which chunks are returned, not the statistics: idf and average length are
    the collection's, as in a search engine's filter context.
    """

    name = "bm25"

    def __init__(self, config: BM25Config | None = None) -> None:
        self.config = config or BM25Config()

    @traced("retrieval.bm25")
    def run(
        self,
        session: Session,
        collection_id: uuid.UUID,
        query: str,
        top_k: int | None = None,
        filters: SearchFilters | None = None,
    ) -> list[Hit]:
        cfg = self.config
        where, params = (filters or SearchFilters()).to_sql("c")
        join = f"JOIN chunks c ON c.id = s.chunk_id WHERE true{where}" if where else ""
        sql = _SQL.format(idf=_LUCENE_IDF if cfg.variant == "lucene" else _OKAPI_IDF, join=join)
        params |= {
            "query": query,
            "cid": collection_id,
            "k1": cfg.k1_value,
            "b": cfg.b_value,
            "limit": top_k or cfg.candidates,
        }
        if cfg.variant == "okapi":
            params["epsilon"] = cfg.epsilon
        rows = session.execute(text(sql), params).all()
        return ranked(self.name, [(r[0], r[1]) for r in rows])


def query_terms(session: Session, collection_id: uuid.UUID, query: str) -> list[str]:
    """The query's tokens as BM25 sees them (each repeated tf times), for debugging and tests."""
    rows = session.execute(
        text(
            "SELECT t.term, t.tf FROM collections col, "
            "groundwork_bm25_terms(groundwork_bm25_config(col.retrieval), :q) t WHERE col.id = :cid"
        ),
        {"q": query, "cid": collection_id},
    ).all()
    return [term for term, tf in rows for _ in range(tf)]
