"""Evaluation datasets: where they may live, and how each format loads.

Every dataset is a file or folder under `<data_dir>/evals/` (uploads land in
`<data_dir>/evals/uploads/<tenant>/<id>/`); a path that resolves outside it, or into another
tenant's uploads, is not found, so a run can never read an arbitrary server file or another
tenant's data.

Formats:
- `beir` (retrieval, and the corpus of an answer dataset): `corpus.jsonl` ({"_id", "title", "text"}),
  `queries.jsonl` ({"_id", "text"}), `qrels/<split>.tsv` (query-id, corpus-id, score).
- `jsonl` (answers): `items.jsonl` (or the file itself), one object per line:
  `{"id": "q1", "question": "...", "answer": "reference answer", "gold_doc_ids": ["doc-7"]}`;
  `answer` null or "" marks an unanswerable item (the right output is the no-answer reply);
  `gold_doc_ids` (source ids of documents) is optional. A `corpus.jsonl` beside it (BEIR corpus
  format) is ingested into the run's collection; without one, the run needs an existing collection.
- `bfcl` (agents): a BFCL folder (`BFCL_v4_<category>.json` + `possible_answer/`, see evals/bfcl.py);
  the split names the category (`live_simple`, `live_multiple`, `irrelevance`, ...).
- `pubmedqa` (answers): PubMedQA's `ori_pqal.json` (+ `test_ground_truth.json`: split `test` is its
  500 ids, `dev` the rest (the pool to tune on), anything else all); the corpus is every instance's
  contexts, one paragraph each (document id = PMID), each question's gold document is its own PMID
  and its reference answer the abstract's conclusion (`LONG_ANSWER`).
"""

from __future__ import annotations

import csv
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from core.quotas import tenant_datasets_dir
from evals.bfcl import BfclCase, load_category
from retrieval.corpus import CorpusDoc

FORMATS = {"retrieval": ("beir",), "answer": ("jsonl", "pubmedqa"), "agent": ("bfcl",)}


class DatasetError(ValueError):
    """The dataset is missing, outside the data dir, or malformed (the run fails with this reason)."""


class DatasetNotFound(DatasetError):
    """No dataset the caller may read at that path (the API answers 404)."""


@dataclass
class BeirDataset:
    corpus: list[CorpusDoc]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


@dataclass
class AnswerItem:
    key: str
    question: str
    answer: str | None
    gold_docs: list[str] = field(default_factory=list)


@dataclass
class AnswerDataset:
    items: list[AnswerItem]
    corpus: list[CorpusDoc]


def datasets_root(data_dir: Path) -> Path:
    return (data_dir / "evals").resolve()


def resolve_path(data_dir: Path, relative: str, tenant: uuid.UUID) -> Path:
    """`relative` (to <data_dir>/evals) as an existing dataset `tenant` may read; DatasetNotFound
    otherwise. Uploads are read only by their tenant: another tenant's upload, a path outside the
    folder and a missing one get the same answer, and no message names a server path."""
    root = datasets_root(data_dir)
    path = (root / relative).resolve()
    uploads = root / "uploads"
    readable = path.is_relative_to(root) and path not in (root, uploads)
    if path.is_relative_to(uploads):
        readable = path.is_relative_to(tenant_datasets_dir(data_dir, tenant))
    if not readable or not path.exists():
        raise DatasetNotFound(f"no dataset at {relative!r} (paths are relative to the evals folder)")
    return path


def public_reason(message: str, data_dir: Path) -> str:
    """`message` with the server's data dir taken out (errors carry paths relative to evals/)."""
    root = str(datasets_root(data_dir))
    message = message.replace(root + "/", "").replace(root, "evals")
    return message.replace(str(data_dir.resolve()), "<data_dir>").replace(str(data_dir), "<data_dir>")


def _jsonl(path: Path) -> list[dict]:
    try:
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path.name}: {exc}") from None


def _corpus(rows: list[dict]) -> list[CorpusDoc]:
    return [
        CorpusDoc(str(r["_id"]), r.get("text", ""), r.get("title", "") or "", r.get("metadata") or {})
        for r in rows
    ]


def doc_text(doc: CorpusDoc) -> str:
    """What is embedded and indexed of a corpus document: its title, then its text."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def load_retrieval(path: Path, split: str = "test") -> BeirDataset:
    """A BEIR folder; only the queries judged in `split` are kept (evaluation runs, benchmarks)."""
    try:
        corpus = _corpus(_jsonl(path / "corpus.jsonl"))
        qrels: dict[str, dict[str, int]] = {}
        with (path / "qrels" / f"{split}.tsv").open(encoding="utf-8") as fh:
            for row in csv.reader(fh, delimiter="\t"):
                if len(row) < 3 or not row[2].lstrip("-").isdigit():
                    continue  # header
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
        rows = _jsonl(path / "queries.jsonl")
        queries = {str(r["_id"]): r["text"] for r in rows if str(r["_id"]) in qrels}
    except (OSError, KeyError, json.JSONDecodeError, DatasetError) as exc:
        raise DatasetError(f"not a BEIR folder ({exc})") from None
    if not queries:
        raise DatasetError(f"no judged queries (queries.jsonl x qrels/{split}.tsv)")
    return BeirDataset(corpus, queries, {q: j for q, j in qrels.items() if q in queries})


def load_answers(path: Path, fmt: str, split: str = "test") -> AnswerDataset:
    if fmt == "pubmedqa":
        return _load_pubmedqa(path, split)
    items_file = path / "items.jsonl" if path.is_dir() else path
    rows = _jsonl(items_file)
    items = []
    for n, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or not str(row.get("question", "")).strip():
            raise DatasetError(f"{items_file.name} line {n}: needs a non-empty 'question'")
        gold = row.get("gold_doc_ids") or []
        items.append(
            AnswerItem(str(row.get("id", n)), row["question"], row.get("answer"), [str(g) for g in gold])
        )
    corpus_file = items_file.parent / "corpus.jsonl"
    corpus = _corpus(_jsonl(corpus_file)) if corpus_file.exists() else []
    if not items:
        raise DatasetError(f"{items_file.name} holds no items")
    return AnswerDataset(items, corpus)


def _load_pubmedqa(path: Path, split: str) -> AnswerDataset:
    folder = path if path.is_dir() else path.parent
    try:
        data = json.loads((folder / "ori_pqal.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"not a PubMedQA folder ({exc})") from None
    keys = list(data)
    test_file = folder / "test_ground_truth.json"
    if split in ("test", "dev") and test_file.exists():
        test = list(json.loads(test_file.read_text(encoding="utf-8")))
        keys = test if split == "test" else [k for k in keys if k not in set(test)]
    # NOTE: contexts stay paragraphs (blank line between them), so the chunker can cut between them.
    corpus = [CorpusDoc(pmid, "\n\n".join(row["CONTEXTS"])) for pmid, row in data.items()]
    items = [AnswerItem(k, data[k]["QUESTION"], data[k]["LONG_ANSWER"], [k]) for k in keys]
    return AnswerDataset(items, corpus)


def load_agent(path: Path, split: str) -> list[BfclCase]:
    try:
        cases = load_category(path if path.is_dir() else path.parent, split)
    except (OSError, KeyError, IndexError, json.JSONDecodeError) as exc:
        raise DatasetError(f"not a BFCL folder ({type(exc).__name__}: {exc})") from None
    except ValueError as exc:
        raise DatasetError(str(exc)) from None
    if not cases:
        raise DatasetError(f"BFCL category {split!r} holds no cases")
    return cases
