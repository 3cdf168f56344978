"""Answer quality on the dev sets: `python -m benchmarks.answers [--limit 12] [--sweep]`.

Builds collections in the configured database (embedded Postgres by default) from the dev sets of
benchmarks/answer_sets.py, chunked by our chunker and embedded by the packaged embedding model, and
answers with the in-process engine (packaged SmolLM2) through the real QA pipeline and hybrid search:

- `--sweep`: retrieval for long documents. For each chunking / expansion / budget variant, the share
  of questions whose prompt sources (after the token budget) overlap the gold span. No generation.
- answers: before (generate on the old retrieval defaults) and after (quote, generate + claim check
  on the new defaults): answer-contains-gold, token F1, citation precision (cited chunk overlaps a
  gold span), share of sentences marked supported, latency.
- claim check agreement with the hand labels of benchmarks/data/claim_labels.jsonl.

Writes benchmarks/results/answers.json and prints tables. `--dump-claims FILE` writes the generated
sentences with their cited passages (material for labelling).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from sqlalchemy import delete, insert

from agents.qa.claims import check_sentence
from agents.qa.pipeline import AskPipeline, AskRequest
from agents.qa.retrieve import retrieve_sources
from agents.qa.sources import Source, fit_to_budget
from agents.qa.verify import engine_verifier
from benchmarks.answer_sets import DATA, contains_gold, long_docs, overlaps_gold, pubmedqa
from cli.db import upgrade_database
from core.database import make_engine, make_session_factory
from core.models import Chunk, Collection, Document, DocumentStatus
from core.runtime import open_database
from core.settings import get_settings
from evals.metrics import token_f1
from inference.client import LocalChatBackend
from inference.provider import start_local_engine
from ingestion.chunking import ChunkingConfig, chunk_document
from retrieval.corpus import build_prefix_index, create_collection
from retrieval.embedding import matryoshka_prefix
from retrieval.models import RetrievalModels
from retrieval.service import SearchRequest
from usecases.answer import embedding_similarity

RESULTS = Path(__file__).parent / "results" / "answers.json"
TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")
BEFORE = {
    "chunking": {"strategy": "fixed", "chunk_size": 256, "chunk_overlap": 32},
    "neighbors": 0,
    "budget": 1200,
}
# Retrieval variants of the sweep: each changes one thing of BEFORE (then the chosen combination).
VARIANTS = {
    "before (fixed 256/32)": {},
    "fixed 128/16": {"chunking": {"strategy": "fixed", "chunk_size": 128, "chunk_overlap": 16}},
    "fixed 254/0": {"chunking": {"strategy": "fixed", "chunk_size": 254, "chunk_overlap": 0}},
    "fixed 254/64": {"chunking": {"strategy": "fixed", "chunk_size": 254, "chunk_overlap": 64}},
    "recursive 254 (sentences)": {
        "chunking": {"strategy": "recursive", "chunk_size": 254, "chunk_overlap": 0}
    },
    "title prefix": {"chunking": {**BEFORE["chunking"], "title_prefix": True}},
    "neighbors 1": {"neighbors": 1},
    "budget 2400, top 16": {"budget": 2400, "top_k": 16},
}


def variant(name: str, overrides: dict) -> dict:
    return {"name": name, **BEFORE, "top_k": 8, **overrides}


def build(sessions, settings, embedder, docs, chunking: ChunkingConfig) -> uuid.UUID:
    """A collection holding `docs` chunked by `chunking`; returns its id."""
    drafts = [chunk_document(d.parsed, chunking, embedder, d.title or d.source_id) for d in docs]
    vectors = embedder.encode([c.embed_text for chunks in drafts for c in chunks])
    prefixes = matryoshka_prefix(vectors, settings.ingestion.index_dim)
    with sessions() as s:
        collection = create_collection(
            s, TENANT, f"bench-answers-{uuid.uuid4().hex[:8]}", settings.embedding_model, embedder.dim,
            settings.ingestion.index_dim, chunking=chunking.model_dump(),
        )  # fmt: skip
        doc_rows, chunk_rows, i = [], [], 0
        for doc, chunks in zip(docs, drafts, strict=True):
            doc_id = uuid.uuid4()
            doc_rows.append(
                dict(id=doc_id, collection_id=collection.id, source_id=doc.source_id, title=doc.title,
                     content_hash=doc.source_id, status=DocumentStatus.indexed, metadata_={})
            )  # fmt: skip
            for ordinal, c in enumerate(chunks):
                chunk_rows.append(
                    dict(id=uuid.uuid4(), document_id=doc_id, collection_id=collection.id, ordinal=ordinal,
                         text=c.text, text_hash=str(i), token_count=c.token_count, char_start=c.char_start,
                         char_end=c.char_end, page=c.page, heading_path=[], metadata_={},
                         embedding=vectors[i], embedding_prefix=prefixes[i])
                )  # fmt: skip
                i += 1
        s.execute(insert(Document), doc_rows)
        s.execute(insert(Chunk), chunk_rows)
        s.commit()
        build_prefix_index(s.get_bind(), collection.id, collection.index_dim)
        return collection.id


def pipeline_for(
    sessions, settings, models: RetrievalModels, backend, similarity, collection_id, config: dict
):
    """The QA pipeline over one collection, with the variant's expansion, budget and top_k."""
    session = sessions()
    collection = session.get(Collection, collection_id)
    collection.retrieval = {"neighbors": config["neighbors"]}
    session.commit()
    qa = settings.qa.model_copy(update={"sources_token_budget": config["budget"], "top_k": config["top_k"]})

    async def retrieve(query: str):
        found = await retrieve_sources(
            session, settings, [collection], SearchRequest(query=query), models, None
        )
        session.commit()
        return found

    return AskPipeline(retrieve, backend, qa, similarity), session


async def sweep_one(pipeline: AskPipeline, items) -> dict:
    hits = retrieved = 0
    for item in items:
        ranked, _ = await pipeline.retrieve(item.question)
        kept = fit_to_budget(ranked, pipeline.settings.sources_token_budget, pipeline.backend.count_tokens)
        retrieved += any(overlaps_gold(s.as_dict(), item) for s in ranked)
        hits += any(overlaps_gold(s.as_dict(), item) for s in kept)
    return {"in_sources": hits / len(items), "retrieved": retrieved / len(items), "n": len(items)}


async def answer_all(
    pipeline: AskPipeline, items, mode: str, dump: list | None, cache_salt: str | None = None
) -> dict:
    """`cache_salt`: a run's own, so that it finds no prompt another run left in the prefix cache."""
    rows = []
    for item in items:
        start = time.perf_counter()
        request = AskRequest(item.question, answer_mode=mode, max_tokens=96, cache_salt=cache_salt)
        events = [e async for e in pipeline.run(request)]
        done, sources = events[-1], events[0]["sources"]
        latency = (time.perf_counter() - start) * 1000
        claims = done["claims"] or []
        rows.append(
            {
                "contains": contains_gold(done["answer"], item),
                "f1": token_f1(done["answer"], item.answer),
                "cited": len(done["citations"]),
                "cited_gold": sum(overlaps_gold(c, item) for c in done["citations"]),
                "in_sources": any(overlaps_gold(s, item) for s in sources),
                "claims": len(claims),
                "supported": sum(c["supported"] is True for c in claims),
                "ms": latency,
                "check_ms": done["timings"].get("claim_check_ms", 0.0),
                "gen_ms": done["timings"].get("generation_ms", 0.0),
                "escalations": [e["reason"] for e in done["escalations"]],
                "model": done["model"],
            }
        )
        if dump is not None:
            by_number = {s["number"]: s["text"] for s in sources}
            for c in claims:
                passage = by_number.get(c["evidence"]["source_number"]) if c["evidence"] else None
                dump.append(
                    {
                        "question": item.question,
                        "sentence": c["text"],
                        "passage": passage,
                        "auto": c["supported"],
                    }
                )
    n = len(rows)
    cited = sum(r["cited"] for r in rows)
    claims = sum(r["claims"] for r in rows)
    return {
        "n": n,
        "answer_contains_gold": sum(r["contains"] for r in rows) / n,
        "token_f1": float(np.mean([r["f1"] for r in rows])),
        "citation_precision": sum(r["cited_gold"] for r in rows) / cited if cited else None,
        "supported_share": sum(r["supported"] for r in rows) / claims if claims else None,
        "gold_in_sources": sum(r["in_sources"] for r in rows) / n,
        "latency_ms_p50": float(np.percentile([r["ms"] for r in rows], 50)),
        "claim_check_ms_mean": float(np.mean([r["check_ms"] for r in rows])),
        "generation_ms_mean": float(np.mean([r["gen_ms"] for r in rows])),
        # qa.cascade (benchmarks/cascade.py): how often each model's answer stood, and why others did not.
        "answered_by": dict(Counter(r["model"] for r in rows)),
        "escalation_reasons": dict(Counter(reason for r in rows for reason in r["escalations"])),
    }


async def label_agreement(backend, settings) -> dict:
    rows = [json.loads(x) for x in (DATA / "claim_labels.jsonl").read_text().splitlines() if x.strip()]
    verify = engine_verifier(backend)
    agree = decided = 0
    for row in rows:
        source = Source(1, "c", "d", "", row["passage"], 1.0)
        supported, _, _ = await check_sentence(
            row["sentence"], [source], verify, settings.qa.claim_floor, settings.qa.claim_copy
        )
        decided += supported is not None
        agree += supported is row["label"]
    return {"n": len(rows), "agreement": agree / len(rows), "decided": decided / len(rows)}


# The new defaults, chosen from the sweep: the token budget, not the ranking, was losing the answer.
AFTER = variant("after", {"budget": 2400, "top_k": 16})
RUNS = [
    ("before", "generate", False),
    ("after", "quote", True),
    ("after", "generate", True),
]


async def run(args, settings, sessions, built: list) -> dict:
    models = RetrievalModels()
    embedder = models.embedder(settings.embedding_model)
    engine = start_local_engine(settings)
    backend = LocalChatBackend(engine)
    similarity = embedding_similarity(models, settings.embedding_model)
    sets = {"pubmedqa": pubmedqa(args.limit, args.corpus_size), "long_docs": long_docs(args.limit)}
    cache: dict[tuple, uuid.UUID] = {}

    def collection(set_name: str, chunking: dict) -> uuid.UUID:
        key = (set_name, json.dumps(chunking, sort_keys=True))
        if key not in cache:
            print(f"indexing {set_name} with {chunking}", file=sys.stderr, flush=True)
            cache[key] = build(sessions, settings, embedder, sets[set_name][0], ChunkingConfig(**chunking))
            built.append(cache[key])
        return cache[key]

    def pipeline_over(set_name: str, config: dict):
        chunked = collection(set_name, config["chunking"])
        return pipeline_for(sessions, settings, models, backend, similarity, chunked, config)

    results: dict = {"limit": args.limit, "corpus_size": args.corpus_size, "sweep": {}, "answers": []}
    try:
        if args.sweep:
            for name, overrides in VARIANTS.items():
                config = variant(name, overrides)
                for set_name, (_, items) in sets.items():
                    pipeline, session = pipeline_over(set_name, config)
                    results["sweep"].setdefault(name, {})[set_name] = await sweep_one(pipeline, items)
                    print(
                        f"sweep {name} {set_name}: {results['sweep'][name][set_name]}",
                        file=sys.stderr,
                        flush=True,
                    )
                    session.close()
        dump: list | None = [] if args.dump_claims else None
        runs = [r for r in RUNS if not args.only or r[1] == args.only]
        for label, mode, check in [] if args.sweep_only else runs:
            config = variant(label, {}) if label == "before" else AFTER
            for set_name, (_, items) in sets.items():
                pipeline, session = pipeline_over(set_name, config)
                pipeline.settings = pipeline.settings.model_copy(update={"claim_check": check})
                row = await answer_all(pipeline, items, mode, dump if mode == "generate" else None)
                results["answers"].append(
                    {"set": set_name, "config": label, "mode": mode, "claim_check": check, **row}
                )
                session.close()
        if dump is not None:
            Path(args.dump_claims).write_text("".join(json.dumps(d) + "\n" for d in dump))
        if not args.sweep_only and not args.only and (DATA / "claim_labels.jsonl").exists():
            results["claim_labels"] = await label_agreement(backend, settings)
    finally:
        engine.shutdown()
    return results


def _pct(value) -> str:
    return "-" if value is None else f"{value:.0%}"


def print_tables(results: dict) -> None:
    console = Console()
    if results["sweep"]:
        table = Table(
            title="Retrieval for long documents: gold span in the prompt's sources (retrieved before budget)"
        )
        table.add_column("variant")
        for set_name in ("pubmedqa", "long_docs"):
            table.add_column(set_name, justify="right")
        for name, per_set in results["sweep"].items():
            cells = [f"{_pct(v['in_sources'])} ({_pct(v['retrieved'])})" for v in per_set.values()]
            table.add_row(name, *cells)
        console.print(table)
    if results["answers"]:
        table = Table(title=f"Answers, packaged SmolLM2-135M, {results['limit']} questions per set")
        for column in (
            "set",
            "config",
            "mode",
            "contains gold",
            "token F1",
            "cite prec.",
            "supported",
            "gold in src",
            "p50 ms",
        ):
            table.add_column(column, justify="left" if column in ("set", "config", "mode") else "right")
        for r in results["answers"]:
            mode = r["mode"] + (" + check" if r["claim_check"] and r["mode"] == "generate" else "")
            table.add_row(
                r["set"], r["config"], mode, _pct(r["answer_contains_gold"]), f"{r['token_f1']:.3f}",
                _pct(r["citation_precision"]), _pct(r["supported_share"]), _pct(r["gold_in_sources"]),
                f"{r['latency_ms_p50']:.0f}",
            )  # fmt: skip
        console.print(table)
    if "claim_labels" in results:
        c = results["claim_labels"]
        console.print(
            f"claim check vs {c['n']} hand labels: agreement {c['agreement']:.0%}, decided {c['decided']:.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=12, help="Questions per set.")
    parser.add_argument("--corpus-size", type=int, default=150, help="PubMedQA abstracts indexed.")
    parser.add_argument("--sweep", action="store_true", help="Also run the retrieval variants.")
    parser.add_argument("--sweep-only", action="store_true", help="Only the retrieval variants.")
    parser.add_argument("--only", choices=["quote", "generate"], help="Only the answer runs of this mode.")
    parser.add_argument("--dump-claims", help="Write generated sentences and their passages here (jsonl).")
    args = parser.parse_args()
    args.sweep = args.sweep or args.sweep_only
    print_tables(run_on_database(run, args, RESULTS))
    print(f"results: {RESULTS}")


def run_on_database(run, args, path: Path) -> dict:
    """`run(args, settings, sessions, built)` on the configured database, the collections whose ids
    it put in `built` deleted afterwards; its results written to `path` and returned."""
    settings = get_settings()
    database = open_database(settings)
    upgrade_database(database.url)
    sessions = make_session_factory(make_engine(database.url))
    built: list[uuid.UUID] = []
    try:
        results = asyncio.run(run(args, settings, sessions, built))
    finally:
        with sessions() as s:
            s.execute(delete(Collection).where(Collection.id.in_(built)))
            s.commit()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
