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
import string
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from agents.qa.sentences import content_words
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
    data = json.loads((SHARED / "pubmedqa" / "ori_pqal.json").read_text())
    test = set(json.loads((SHARED / "pubmedqa" / "test_ground_truth.json").read_text()))
    dev = [pmid for pmid in data if pmid not in test][: max(corpus_size, limit)]
    docs, items = [], []
    for pmid in dev:
        text = "\n\n".join(data[pmid]["CONTEXTS"])
        docs.append(Doc(f"{pmid}.txt", "", parse(text.encode(), f"{pmid}.txt")))
    for pmid in dev[:limit]:
        entry = data[pmid]
        items.append(Item(entry["QUESTION"], entry["LONG_ANSWER"], f"{pmid}.txt", [(0, 10**9)], False))
    return docs, items


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


def _tokens(text: str) -> list[str]:
    text = re.sub(r"\[\d+\]", " ", text.lower())
    text = "".join(" " if c in string.punctuation else c for c in text)
    return [t for t in text.split() if t not in {"a", "an", "the"}]


def token_f1(answer: str, gold: str) -> float:
    a, g = _tokens(answer), _tokens(gold)
    common = sum((Counter(a) & Counter(g)).values())
    if not common:
        return 0.0
    precision, recall = common / len(a), common / len(g)
    return 2 * precision * recall / (precision + recall)


def contains_gold(answer: str, item: Item) -> bool:
    """Short gold: the normalised string is in the answer. Long gold (a conclusion): at least 40% of
    its content words are."""
    if item.short:
        return " ".join(_tokens(item.answer)) in " ".join(_tokens(answer))
    gold = content_words(item.answer)
    return bool(gold) and len(gold & content_words(answer)) / len(gold) >= 0.4


def overlaps_gold(ref: dict, item: Item) -> bool:
    """Whether a source or citation (`source_id`, `char_start`, `char_end`) overlaps a gold span."""
    if ref.get("source_id") != item.source_id:
        return False
    start, end = ref.get("char_start") or 0, ref.get("char_end") or 0
    return any(start < b and a < end for a, b in item.spans)
