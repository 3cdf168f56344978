"""Hybrid fusion on the dev sets: `python -m benchmarks.fusion [--dataset DIR ...]`.

For each BEIR folder (default: ../shared/eval NFCorpus and the DBpedia subset) the corpus goes into
a throwaway collection, then in one run:

1. every judged query is searched once by BM25 and dense, 1,000 deep each; the fusion grid (RRF
   k = 60 and convex combinations with both normalisations, alpha 0.2..0.9, depths 100, 300,
   1,000) is scored on those rankings with the real fusion classes (no search per grid point);
   alpha (tm2c2, at the default's depth) is the best mean nDCG@10 among those at least as good as
   RRF over 1,000 each on every dev set;
2. the named pipelines (bm25, dense, hybrid as shipped before, RRF over 1,000 each, convex, the
   current default) run end to end through `SearchPipeline` for nDCG@10 and latency (query
   embedding included).

Writes benchmarks/results/fusion.json and prints tables. Dev sets only: choose defaults here.
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table
from sqlalchemy import delete, text

from benchmarks.beir import corpus_vectors, ingest, run_mode
from cli.db import upgrade_database
from core.database import make_engine, make_session_factory
from core.models import Collection
from core.runtime import open_database
from core.settings import get_settings
from core.settings.retrieval import BM25Config, DenseConfig, FusionConfig, RetrievalConfig
from evals.datasets import BeirDataset, load_retrieval
from evals.metrics import retrieval_metrics
from retrieval.bm25 import BM25Retriever
from retrieval.corpus import build_prefix_index, create_collection
from retrieval.dense import DenseRetriever
from retrieval.fusion import fuse
from retrieval.models import RetrievalModels
from retrieval.pipeline import SearchPipeline

DEFAULT_TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")
SHARED = Path(__file__).resolve().parents[2] / "shared" / "eval"
DATASETS = [SHARED / "nfcorpus" / "beir_like", SHARED / "dbpedia-entity-subset"]
RESULTS = Path(__file__).parent / "results" / "fusion.json"
_SOURCE_SQL = text(
    "SELECT c.id, d.source_id FROM chunks c JOIN documents d ON d.id = c.document_id "
    "WHERE c.collection_id = :cid"
)
DEPTHS = (100, 300, 1000)
ALPHAS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9)


def named_configs(alpha: float) -> dict[str, RetrievalConfig]:
    def convex(bm25: int, dense: int, overfetch: int) -> RetrievalConfig:
        return RetrievalConfig(
            bm25=BM25Config(candidates=bm25),
            dense=DenseConfig(candidates=dense, overfetch=overfetch),
            fusion=FusionConfig(method="convex", alpha=alpha, normalization="tm2c2"),
        )

    return {
        "bm25": RetrievalConfig(mode="bm25"),
        "dense": RetrievalConfig(mode="dense"),
        "hybrid before (rrf, 100 each)": RetrievalConfig(
            bm25=BM25Config(candidates=100),
            dense=DenseConfig(candidates=100),
            fusion=FusionConfig(method="rrf"),
        ),
        "rrf, 1000 each": RetrievalConfig(
            bm25=BM25Config(candidates=1000),
            dense=DenseConfig(candidates=1000, overfetch=1),
            fusion=FusionConfig(method="rrf"),
        ),
        f"convex a={alpha}, 1000 each": convex(1000, 1000, 1),
        f"convex a={alpha}, 300 each": convex(300, 300, 2),
        f"convex a={alpha}, 100 each": convex(100, 100, 4),
        # The shipped default (RetrievalConfig()) with the alpha chosen here.
        f"default (alpha {alpha})": RetrievalConfig(
            fusion=RetrievalConfig().fusion.model_copy(update={"alpha": alpha})
        ),
    }


def grid(data: BeirDataset, rankings: dict[str, dict], source: dict) -> list[dict]:
    """nDCG@10 of each fusion on the stored deep rankings (the real fusion classes)."""
    fusions = [("rrf", FusionConfig(method="rrf", k=60))]
    for norm in ("minmax", "tm2c2"):
        fusions += [
            (f"convex {norm} a={a}", FusionConfig(method="convex", alpha=a, normalization=norm))
            for a in ALPHAS
        ]
    rows = []
    for depth in DEPTHS:
        for label, cfg in fusions:
            runs = {
                q: [
                    source[h.chunk_id]
                    for h in fuse(cfg, {k: v[:depth] for k, v in r.items()}, {"bm25": depth, "dense": depth})[
                        :100
                    ]
                ]
                for q, r in rankings.items()
            }
            metrics = retrieval_metrics(runs, data.qrels)
            rows.append({"fusion": label, "depth": depth, **{k: round(v, 4) for k, v in metrics.items()}})
    return rows


def prepare(sessions, settings, models: RetrievalModels, folder: Path) -> dict:
    """Ingest the corpus into a throwaway collection; the deep rankings and the fusion grid."""
    data = load_retrieval(folder)
    embedder = models.embedder(settings.embedding_model)
    vectors = corpus_vectors(
        data, embedder.encode, settings.data_dir / "eval-cache", settings.embedding_model
    )
    with sessions() as s:
        col = create_collection(
            s, DEFAULT_TENANT, f"fusion-{uuid.uuid4().hex[:8]}", settings.embedding_model, embedder.dim, 128
        )
        s.commit()
        build_prefix_index(s.get_bind(), col.id, 128)
        ingest(s, col, data, vectors)
        source = dict(s.execute(_SOURCE_SQL, {"cid": col.id}).all())
        bm25 = BM25Retriever(BM25Config(candidates=1000))
        dense = DenseRetriever(DenseConfig(candidates=1000, overfetch=1))
        qvecs = embedder.encode(list(data.queries.values()))
        rankings = {}
        for (qid, query), vec in zip(data.queries.items(), qvecs, strict=True):
            rankings[qid] = {"bm25": bm25.run(s, col.id, query), "dense": dense.run(s, col.id, 128, vec)}
            s.rollback()
    rows = grid(data, rankings, source)
    print(f"{folder.name}: grid done", flush=True)
    return {"folder": folder, "data": data, "collection": col, "grid": rows}


def best_alpha(studies: list[dict]) -> float:
    """The tm2c2 alpha, at the shipped candidate depth, with the best mean nDCG@10 over the dev sets
    among those at least as good as RRF of the top 1,000 of each retriever on every one of them (the
    bar hybrid must clear); the best mean overall when none clears it."""
    depth = RetrievalConfig().bm25.candidates

    def ndcg(study: dict, label: str, at: int) -> float:
        return next(r["ndcg@10"] for r in study["grid"] if r["fusion"] == label and r["depth"] == at)

    def score(alpha: float) -> tuple[bool, float]:
        label = f"convex tm2c2 a={alpha}"
        margins = [ndcg(st, label, depth) - ndcg(st, "rrf", 1000) for st in studies]
        return min(margins) >= 0, sum(ndcg(st, label, depth) for st in studies) / len(studies)

    return max(ALPHAS, key=score)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", type=Path, action="append", help="BEIR folder (repeatable).")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # see benchmarks/retrieval.py: one thread embeds one query fastest here
    settings = get_settings()
    database = open_database(settings)
    upgrade_database(database.url)  # a fresh data dir (benchmarks run apart from the platform)
    sessions = make_session_factory(make_engine(database.url))
    models = RetrievalModels()
    studies = [prepare(sessions, settings, models, f) for f in args.dataset or DATASETS]
    alpha = best_alpha(studies)
    report: dict = {"alpha_chosen": alpha, "datasets": []}
    for st in studies:
        with sessions() as s:
            col = s.merge(st["collection"])
            pipelines = {
                name: run_mode(
                    s, col, st["data"], SearchPipeline(cfg.model_copy(update={"top_k": 100}), models)
                )
                for name, cfg in named_configs(alpha).items()
            }
            s.execute(delete(Collection).where(Collection.id == col.id))
            s.commit()
        report["datasets"].append(
            {
                "dataset": str(st["folder"]),
                "queries": len(st["data"].queries),
                "grid": st["grid"],
                "pipelines": pipelines,
            }
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    console = Console()
    for ds in report["datasets"]:
        table = Table(title=f"{ds['dataset']} ({ds['queries']} queries)")
        for col in ("pipeline", "ndcg@10", "recall@100", "p50 ms", "p99 ms"):
            table.add_column(col)
        for name, row in ds["pipelines"].items():
            cells = (row[k] for k in ("ndcg@10", "recall@100", "latency_ms_p50", "latency_ms_p99"))
            table.add_row(name, *map(str, cells))
        console.print(table)
        best = sorted(ds["grid"], key=lambda r: -r["ndcg@10"])[:8]
        console.print(
            "best fusions on the deep rankings:", [(r["fusion"], r["depth"], r["ndcg@10"]) for r in best]
        )


if __name__ == "__main__":
    main()
