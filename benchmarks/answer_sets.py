"""The answer eval's data and metrics (benchmarks/answers.py).

Two dev sets:
- `pubmedqa`: questions of PubMedQA's train/dev pool (not its 500-id test split); each abstract's
  contexts are a document, the gold span is the whole abstract, the gold answer its conclusion
  (LONG_ANSWER, which is not in the abstract: only partial overlap is possible).
- `long_docs`: hand-written questions (benchmarks/data/long_docs_qa.jsonl) over the shared parsing
  samples (JATS articles, Wikipedia pages, PDFs) parsed by our own parsers; the gold answer is a short
  string and the gold spans the sentences that state it: `evidence`, and under `also` the other
  sentences of the document that state the same answer (a citation of any of them is right).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from agents.qa.sentences import content_words
from evals.datasets import load_answers
from evals.metrics import normalize_answer
from ingestion.parsers import parse
from ingestion.parsers.base import ParsedDocument

SHARED = Path(__file__).resolve().parents[2] / "shared" / "eval"
DATA = Path(__file__).parent / "data"


@dataclass
class Doc:
    source_id: str
    title: str
    parsed: ParsedDocument


@dataclass
class Item:
    question: str
    answer: str
    source_id: str
    spans: list[tuple[int, int]]  # gold character spans in the document's parsed text
    short: bool  # short answers are graded by containment, long ones by content-word recall
    extra: dict = field(default_factory=dict)


def pubmedqa(limit: int, corpus_size: int) -> tuple[list[Doc], list[Item]]:
    """The first `max(corpus_size, limit)` questions of the dev pool, their abstracts the corpus."""
    data = load_answers(SHARED / "pubmedqa", "pubmedqa", "dev")
    items = data.items[: max(corpus_size, limit)]
    texts = {doc.source_id: doc.text for doc in data.corpus}
    docs = [Doc(f"{i.key}.txt", "", parse(texts[i.key].encode(), f"{i.key}.txt")) for i in items]
    # The gold span is the whole abstract; the gold answer (its conclusion) is not in it.
    gold = [Item(i.question, i.answer or "", f"{i.key}.txt", [(0, 10**9)], False) for i in items[:limit]]
    return docs, gold


def _locate(text: str, snippet: str) -> tuple[int, int]:
    pattern = r"\s+".join(re.escape(word) for word in snippet.split())
    match = re.search(pattern, text)
    if match is None:
        raise ValueError(f"evidence not found in the parsed document: {snippet[:60]!r}")
    return match.span()


def long_docs(limit: int) -> tuple[list[Doc], list[Item]]:
    rows = [json.loads(line) for line in (DATA / "long_docs_qa.jsonl").read_text().splitlines() if line]
    docs: dict[str, Doc] = {}
    for row in rows:
        if row["doc"] not in docs:
            path = SHARED / "docs" / row["doc"]
            parsed = parse(path.read_bytes(), path.name)
            docs[row["doc"]] = Doc(path.name, parsed.title or "", parsed)
    items = [
        Item(
            r["question"],
            r["answer"],
            Path(r["doc"]).name,
            [_locate(docs[r["doc"]].parsed.text, e) for e in [r["evidence"], *r.get("also", [])]],
            True,
        )
        for r in rows[:limit]
    ]
    return list(docs.values()), items


def contains_gold(answer: str, item: Item) -> bool:
    """Short gold: the normalised string is in the answer. Long gold (a conclusion): at least 40% of
    its content words are."""
    if item.short:
        return normalize_answer(item.answer) in normalize_answer(answer)
    gold = content_words(item.answer)
    return bool(gold) and len(gold & content_words(answer)) / len(gold) >= 0.4


def overlaps_gold(ref: dict, item: Item) -> bool:
    """Whether a source or citation (`source_id`, `char_start`, `char_end`) overlaps a gold span."""
    if ref.get("source_id") != item.source_id:
        return False
    start, end = ref.get("char_start") or 0, ref.get("char_end") or 0
    return any(start < b and a < end for a, b in item.spans)
