"""The model cascade against each of its models alone, on the answer dev sets:
`python -m benchmarks.cascade --models qwen2.5-coder-0.5b,qwen2.5-coder-1.5b [--limit 12] [--mode generate]`.

Each model answers every question alone, then the cascade (qa.cascade: the models in the order
given, the next one answering when the checks find an answer weak, agents/qa/cascade.py), through
the real QA pipeline on the collections benchmarks/answers.py builds (its `after` retrieval
defaults). Reported per set and run: contains-gold, token F1, citation precision, supported
sentences, mean generation time (the claim check apart), which model's answer stood and why the
others escalated; and the cascade's quality and generation time relative to the last model alone
(FrugalGPT's claim: near the large model's quality for a fraction of its time).

Models are specs our engine loads (`groundwork models list`; pull the Qwen GGUFs first with
`groundwork models pull NAME`). Writes benchmarks/results/cascade.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.agents import cpu_info
from benchmarks.answer_sets import long_docs, pubmedqa
from benchmarks.answers import AFTER, answer_all, build, pipeline_for, run_on_database
from inference.client import LocalChatBackend
from inference.provider import Rung, start_local_engine
from ingestion.chunking import ChunkingConfig
from retrieval.models import RetrievalModels
from usecases.answer import embedding_similarity

RESULTS = Path(__file__).parent / "results" / "cascade.json"


def relative(cascade: dict, alone: dict) -> dict:
    """The cascade's quality and generation time as shares of the last model's alone."""

    def share(key: str) -> float | None:
        a, b = cascade.get(key), alone.get(key)
        return None if a is None or not b else a / b

    return {
        k: share(k) for k in ("answer_contains_gold", "token_f1", "citation_precision", "generation_ms_mean")
    }


async def run(args, settings, sessions, built: list) -> dict:
    names = args.models.split(",")
    engines = [start_local_engine(settings, name) for name in names]
    rungs = [Rung(name, LocalChatBackend(engine)) for name, engine in zip(names, engines, strict=True)]
    models = RetrievalModels()
    embedder = models.embedder(settings.embedding_model)
    similarity = embedding_similarity(models, settings.embedding_model)
    sets = {"pubmedqa": pubmedqa(args.limit, args.corpus_size), "long_docs": long_docs(args.limit)}
    ladders = [(rung.name, [rung]) for rung in rungs] + [(" -> ".join(names), rungs)]
    rows: list[dict] = []
    try:
        for set_name, (docs, items) in sets.items():
            collection = build(sessions, settings, embedder, docs, ChunkingConfig(**AFTER["chunking"]))
            built.append(collection)
            for label, ladder in ladders:
                pipeline, session = pipeline_for(
                    sessions, settings, models, ladder[0].backend, similarity, collection, AFTER
                )
                pipeline.rungs = ladder
                try:
                    # NOTE: salted per run: the cascade's tries otherwise reuse the prompts each
                    # model alone left in its prefix cache and look as fast as one model.
                    row = await answer_all(pipeline, items, args.mode, None, cache_salt=label)
                finally:
                    session.close()
                rows.append({"set": set_name, "run": label, "cascade": len(ladder) > 1, **row})
    finally:
        for engine in engines:
            engine.shutdown()
    for row in rows:
        if row["cascade"]:
            alone = next(r for r in rows if r["set"] == row["set"] and r["run"] == names[-1])
            row["vs_last_alone"] = relative(row, alone)
    return {
        "models": names,
        "machine": cpu_info(),
        "mode": args.mode,
        "limit": args.limit,
        "qa": settings.qa.model_dump(),
        "rows": rows,
    }


def print_table(results: dict) -> None:
    def pct(value) -> str:
        return "-" if value is None else f"{value:.0%}"

    table = Table(
        title=f"Cascade vs each model alone ({results['mode']}, {results['limit']} questions per set)"
    )
    for column in ("set", "run", "contains gold", "F1", "cite prec.", "supported", "gen ms", "stood", "why"):
        table.add_column(column, justify="left" if column in ("set", "run", "stood", "why") else "right")
    for r in results["rows"]:
        table.add_row(
            r["set"], r["run"], pct(r["answer_contains_gold"]), f"{r['token_f1']:.3f}",
            pct(r["citation_precision"]), pct(r["supported_share"]), f"{r['generation_ms_mean']:.0f}",
            json.dumps(r["answered_by"]), json.dumps(r["escalation_reasons"]),
        )  # fmt: skip
    Console().print(table)
    for r in results["rows"]:
        if "vs_last_alone" in r:
            rel = {k: pct(v) for k, v in r["vs_last_alone"].items()}
            print(f"{r['set']}: cascade / {results['models'][-1]} alone: {rel}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", required=True, help="Comma-separated model specs, smallest first.")
    parser.add_argument("--limit", type=int, default=12, help="Questions per set.")
    parser.add_argument("--corpus-size", type=int, default=150, help="PubMedQA abstracts indexed.")
    parser.add_argument("--mode", choices=["quote", "generate"], default="generate", help="Answer mode.")
    print_table(run_on_database(run, parser.parse_args(), RESULTS))
    print(f"results: {RESULTS}")


if __name__ == "__main__":
    main()
