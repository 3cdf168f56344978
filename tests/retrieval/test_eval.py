"""`groundwork eval retrieval` on a tiny BEIR folder whose answers are known."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CORPUS = [
    {"_id": "d1", "title": "Tides", "text": "The moon's gravity pulls the oceans, causing tides."},
    {"_id": "d2", "title": "Bread", "text": "Yeast makes bread dough rise before baking."},
    {"_id": "d3", "title": "Error codes", "text": "Error E-7731 means the disk is full."},
]
QUERIES = [{"_id": "q1", "text": "why do tides happen"}, {"_id": "q2", "text": "E-7731"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t2\nq2\td2\t0\n"


def test_eval_writes_metrics_per_mode(tmp_path, settings, monkeypatch, make_collection):
    from cli.eval import app as eval_app
    from core.settings import get_settings

    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in CORPUS))
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in QUERIES))
    (folder / "qrels" / "test.tsv").write_text(QRELS)
    monkeypatch.setenv("GROUNDWORK_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("GROUNDWORK_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    app = typer.Typer()
    app.add_typer(eval_app, name="eval")
    out = tmp_path / "report.json"
    args = ["eval", "retrieval", "--dataset", str(folder), "--index-dims", "64,384", "--output", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report["modes"]) == {"bm25", "dense@64", "hybrid@64", "dense@384"}
    assert report["queries"] == 2
    for row in report["modes"].values():
        assert row["recall@100"] == 1.0 and row["latency_ms_p50"] > 0
    assert report["modes"]["bm25"]["mrr@10"] == 1.0  # both answers ranked first
    assert report["modes"]["hybrid@64"]["ndcg@10"] == 1.0

    # reusing a collection that already holds the corpus: no ingestion, the collection stays
    from retrieval.corpus import CorpusDoc

    kept = make_collection([CorpusDoc(d["_id"], d["text"], d["title"]) for d in CORPUS])
    args = ["eval", "retrieval", "--dataset", str(folder), "--collection", kept.name, "--modes", "bm25"]
    result = CliRunner().invoke(app, [*args, "--output", str(out)])
    get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["modes"]["bm25"]["mrr@10"] == 1.0
