"""Metadata filters, compiled to SQL predicates over `chunks c` so that they are applied inside the
query that ranks, never after its top-k cut.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Scalar = str | int | float | bool


class SearchFilters(BaseModel):
    """Every field narrows the result; all given fields must hold (AND)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key is an error, not a no-op

    document_ids: list[uuid.UUID] | None = Field(default=None, description="Only these documents.")
    source_ids: list[str] | None = Field(default=None, description="Only documents with these source ids.")
    metadata: dict[str, Scalar | list[Scalar]] = Field(
        default_factory=dict,
        description="key -> value (or list: any of) matched against the chunk's metadata merged over "
        "its document's metadata (JSON equality).",
    )
    created_after: datetime | None = Field(default=None, description="Documents created at or after.")
    created_before: datetime | None = Field(default=None, description="Documents created before.")

    def to_sql(self, alias: str = "c") -> tuple[str, dict[str, Any]]:
        """(" AND ..." predicate over chunks `alias`, bind params); "" when there is no filter."""
        clauses: list[str] = []
        doc_clauses: list[str] = []
        params: dict[str, Any] = {}
        if self.document_ids is not None:
            clauses.append(f"{alias}.document_id = ANY(CAST(:f_doc_ids AS uuid[]))")
            params["f_doc_ids"] = [str(d) for d in self.document_ids]
        if self.source_ids is not None:
            doc_clauses.append("d.source_id = ANY(CAST(:f_source_ids AS text[]))")
            params["f_source_ids"] = list(self.source_ids)
        for i, (key, value) in enumerate(sorted(self.metadata.items())):
            values = value if isinstance(value, list) else [value]
            alternatives = []
            for j, v in enumerate(values):
                name = f"f_meta_{i}_{j}"
                params[name] = json.dumps({key: v})
                alternatives.append(f"(d.metadata || {alias}.metadata) @> CAST(:{name} AS jsonb)")
            doc_clauses.append("(" + " OR ".join(alternatives or ["false"]) + ")")
        if self.created_after is not None:
            doc_clauses.append("d.created_at >= :f_after")
            params["f_after"] = self.created_after
        if self.created_before is not None:
            doc_clauses.append("d.created_at < :f_before")
            params["f_before"] = self.created_before
        if doc_clauses:
            # NOTE: EXISTS keeps `chunks` the only table in FROM, so the HNSW index stays usable.
            clauses.append(
                f"EXISTS (SELECT 1 FROM documents d WHERE d.id = {alias}.document_id AND "
                + " AND ".join(doc_clauses)
                + ")"
            )
        return "".join(f" AND {c}" for c in clauses), params
