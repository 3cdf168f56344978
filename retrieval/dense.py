"""Dense retrieval: HNSW over the Matryoshka prefix, over-fetched, then exact full-vector re-score.

NOTE: the ANN query must repeat the per-collection partial index's expression and predicate
(`prefix_expression(dim)` and `collection_id = '<id>'` as a literal, see retrieval/embedding.py):
with a bind parameter instead of the literal, Postgres cannot prove the partial index applies.
"""

from __future__ import annotations

import uuid

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from core.settings.retrieval import DenseConfig
from core.tracing import traced
from retrieval.embedding import matryoshka_prefix, prefix_expression
from retrieval.filters import SearchFilters
from retrieval.types import Hit, ranked

_ANN_SQL = """
WITH cand AS MATERIALIZED (
    SELECT c.id, c.embedding FROM chunks c
    WHERE c.collection_id = '{cid}'{where}
    ORDER BY {expr} <=> CAST(:qp AS vector({dim}))
    LIMIT :fetch
)
SELECT id, 1 - (embedding <=> CAST(:q AS vector)) AS score FROM cand
WHERE embedding IS NOT NULL
ORDER BY score DESC, id
LIMIT :limit
"""

_EXACT_SQL = """
SELECT c.id, 1 - (c.embedding <=> CAST(:q AS vector)) AS score FROM chunks c
WHERE c.collection_id = :cid AND c.embedding IS NOT NULL{where}
ORDER BY c.embedding <=> CAST(:q AS vector), c.id
LIMIT :limit
"""


def _vector_literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in v.tolist()) + "]"


def ann_sql(collection_id: uuid.UUID, index_dim: int, where: str = "") -> str:
    """The ANN statement, written to match the collection's partial HNSW index."""
    cid = uuid.UUID(str(collection_id))  # validated: interpolated into SQL
    return _ANN_SQL.format(cid=cid, where=where, expr=prefix_expression(index_dim), dim=int(index_dim))


class DenseRetriever:
    """Cosine similarity between the query vector and the chunks' full stored vectors.

    The candidate set comes from the HNSW index over the `index_dim` prefix (max(top_k, candidates)
    * overfetch rows, ef_search raised to match); with filters, pgvector 0.6 filters *after* the
    index walk, so a selective filter can leave fewer than asked: then the exact, filtered scan
    answers instead.
    """

    name = "dense"

    def __init__(self, config: DenseConfig | None = None) -> None:
        self.config = config or DenseConfig()

    @traced("retrieval.dense")
    def run(
        self,
        session: Session,
        collection_id: uuid.UUID,
        index_dim: int,
        query_vector: np.ndarray,
        top_k: int | None = None,
        filters: SearchFilters | None = None,
    ) -> list[Hit]:
        limit = top_k or self.config.candidates
        where, params = (filters or SearchFilters()).to_sql("c")
        params |= {"q": _vector_literal(np.asarray(query_vector, dtype=np.float32)), "limit": limit}
        if self.config.exact:
            return self._exact(session, collection_id, where, params)
        fetch = max(limit, self.config.candidates) * self.config.overfetch
        # NOTE: is_local=true: the setting ends with this transaction, not with the pooled connection.
        session.execute(
            text("SELECT set_config('hnsw.ef_search', :ef, true)"),
            {"ef": str(min(1000, max(self.config.ef_search, fetch)))},
        )
        sql = ann_sql(collection_id, index_dim, where)
        prefix = matryoshka_prefix(np.asarray(query_vector, dtype=np.float32), index_dim)
        rows = session.execute(text(sql), params | {"qp": _vector_literal(prefix), "fetch": fetch}).all()
        if where and len(rows) < limit:
            return self._exact(session, collection_id, where, params)
        return ranked(self.name, [(r[0], r[1]) for r in rows])

    def _exact(self, session: Session, collection_id: uuid.UUID, where: str, params: dict) -> list[Hit]:
        rows = session.execute(text(_EXACT_SQL.format(where=where)), params | {"cid": collection_id}).all()
        return ranked(self.name, [(r[0], r[1]) for r in rows])
