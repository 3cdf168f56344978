"""What stages pass each other: ranked chunk ids with the score and rank each stage gave them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass
class Hit:
    chunk_id: uuid.UUID
    score: float  # the score of the last stage that ranked it
    scores: dict[str, float] = field(default_factory=dict)  # stage name -> that stage's score
    ranks: dict[str, int] = field(default_factory=dict)  # stage name -> 1-based rank in that stage


def ranked(stage: str, rows: list[tuple[uuid.UUID, float]]) -> list[Hit]:
    """Hits from (chunk id, score) rows already sorted best first."""
    return [Hit(cid, float(s), {stage: float(s)}, {stage: i}) for i, (cid, s) in enumerate(rows, start=1)]
