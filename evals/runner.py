"""Running one evaluation: claim -> [ingest the corpus] -> evaluate every (variant, item) not yet
stored -> aggregate -> finish. Safe to run any number of times for the same run.

NOTE (resume invariant): an item's row is inserted in the same transaction that advances
`items_done`, one item per transaction, and the loop skips every (variant, item) that has a row.
A worker killed mid-run therefore loses at most the item in flight, and the next worker evaluates
only what has no row. The unique key (run, variant, item) turns a second evaluation into an error,
never into a silent duplicate.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from dataclasses import dataclass

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from core import durable
from core.database import session_scope
from core.models import Collection, EvalItem, EvalRun, JobStatus
from core.settings import Settings
from evals import datasets as ds
from evals.items import AgentEvaluator, AnswerEvaluator, RetrievalEvaluator
from evals.metrics import latency_summary, mean_metrics
from evals.prepare import ensure_collection
from evals.sweep import sweep_table
from inference.provider import LLMProvider
from retrieval.models import RetrievalModels

log = logging.getLogger(__name__)
OPEN = (JobStatus.queued, JobStatus.running)


class Stop(Exception):
    """The run was cancelled or deleted while this worker held it."""


@dataclass
class RunContext:
    settings: Settings
    sessions: sessionmaker[Session]
    worker: str  # pid@host, recorded on every item this worker evaluates
    llm: LLMProvider  # the answer and agent kinds' generator, loaded on first use
    models: RetrievalModels  # the process's embedders and cross-encoders


def spread_sample(keys: list[str], n: int, seed: int = 0) -> list[str]:
    """`n` of `keys`, a seeded sample kept in file order.

    NOTE: not the first `n`: datasets are often sorted (by topic, difficulty, id), and the first 40
    BFCL live_simple cases scored 70% where 40 spread over the file scored 35%.
    """
    if n >= len(keys):
        return keys
    picked = set(random.Random(seed).sample(range(len(keys)), n))
    return [k for i, k in enumerate(keys) if i in picked]


def claim(
    session: Session, run_id: uuid.UUID, owner: str, stale_after_s: float, max_attempts: int
) -> EvalRun | None:
    """Take the run for `owner` (a task's delivery) unless it is finished or another live worker holds
    it; a run claimed `max_attempts` times (its workers keep dying) fails instead."""
    running = {"status": JobStatus.running, "error": None}
    run = durable.claim(session, EvalRun, run_id, owner, stale_after_s, max_attempts, OPEN, **running)
    if run is None:
        reason = func.concat("gave up: the run's worker died ", EvalRun.attempts, " times")
        failed = {"status": JobStatus.failed, "error": reason}
        durable.give_up(session, EvalRun, run_id, owner, stale_after_s, max_attempts, OPEN, **failed)
    return run


def beat(session: Session, run_id: uuid.UUID, owner: str, **values) -> None:
    """Record progress and a heartbeat; Stop if the run is no longer ours: cancelled, deleted, or
    taken over by another worker while this one was silent (then this one writes nothing more)."""
    if not durable.beat(session, EvalRun, [run_id], owner, (JobStatus.running,), **values):
        raise Stop(str(run_id))  # (session_scope rolls back what the transaction wrote)


def fail_run(session: Session, run_id: uuid.UUID, owner: str, reason: str) -> bool:
    """Mark the run failed if `owner` still holds it (a worker that lost it writes nothing)."""
    failed = session.execute(
        update(EvalRun)
        .where(EvalRun.id == run_id, EvalRun.status == JobStatus.running, EvalRun.claimed_by == owner)
        .values(status=JobStatus.failed, error=reason)
        .returning(EvalRun.id)
    )
    return failed.first() is not None


def run_eval(ctx: RunContext, run_id: uuid.UUID, owner: str) -> str:
    """Evaluate the run to its end as `owner` (a task's delivery: tasks.py); returns its final
    status (or 'skipped')."""
    knobs = ctx.settings.ingestion
    with session_scope(ctx.sessions) as session:
        run = claim(session, run_id, owner, knobs.stale_after_s, knobs.max_attempts)
        if run is None:
            return "skipped"
    try:
        _evaluate(ctx, run_id, owner)
    except Stop:
        _cleanup(ctx, run_id)
        return "stopped"
    except Exception as exc:
        log.exception("eval run %s failed", run_id)
        reason = f"{type(exc).__name__}: {exc}"[:2000] if not isinstance(exc, ds.DatasetError) else str(exc)
        reason = ds.public_reason(reason, ctx.settings.data_dir)
        with session_scope(ctx.sessions) as session:
            fail_run(session, run_id, owner, reason)
        _cleanup(ctx, run_id)
        return "failed"
    _cleanup(ctx, run_id)
    return "succeeded"


def _evaluate(ctx: RunContext, run_id: uuid.UUID, owner: str) -> None:
    with session_scope(ctx.sessions) as session:
        run = session.get(EvalRun, run_id)
        kind, dataset, config = run.kind, dict(run.dataset), dict(run.config)
        tenant_id = run.tenant_id
    path = ds.resolve_path(ctx.settings.data_dir, dataset["path"], tenant_id)
    split = dataset.get("split", "test")
    if kind == "retrieval":
        data = ds.load_retrieval(path, split)
        corpus = data.corpus if config.get("ingest", True) else []
        keys = list(data.queries)
        evaluator_for = lambda collection, overrides: RetrievalEvaluator(  # noqa: E731
            ctx, collection, overrides, data
        )
    elif kind == "agent":
        cases = {case.id: case for case in ds.load_agent(path, split)}
        corpus, keys = None, list(cases)
        evaluator_for = lambda collection, overrides: AgentEvaluator(  # noqa: E731
            ctx, cases, config.get("generation", {})
        )
    else:
        answers = ds.load_answers(path, dataset.get("format", "jsonl"), split)
        corpus = answers.corpus if config.get("ingest", True) else []
        by_key = {item.key: item for item in answers.items}
        keys = list(by_key)
        evaluator_for = lambda collection, overrides: AnswerEvaluator(  # noqa: E731
            ctx, collection, overrides, by_key, config.get("generation", {}), config.get("judge")
        )
    if config.get("max_items"):
        keys = spread_sample(keys, config["max_items"], config.get("seed", 0))
    variants = config.get("variants") or [{"label": "base", "overrides": {}}]
    # An agent run calls the model on the case's own functions: no collection.
    collection_id = None
    if corpus is not None:
        collection_id = ensure_collection(ctx, run_id, corpus, lambda s, **v: beat(s, run_id, owner, **v))
    with session_scope(ctx.sessions) as session:
        beat(session, run_id, owner, items_total=len(keys) * len(variants), progress={"stage": "evaluating"})
        done = set(
            session.execute(select(EvalItem.variant, EvalItem.item_key).where(EvalItem.run_id == run_id))
        )
    for variant in variants:
        collection = None
        if collection_id is not None:
            with session_scope(ctx.sessions) as session:
                collection = session.get(Collection, collection_id)
                session.expunge(collection)
        evaluator = evaluator_for(collection, variant["overrides"])
        for key in keys:
            if (variant["label"], key) in done:
                continue
            with session_scope(ctx.sessions) as session:
                start = time.perf_counter()
                result = asyncio.run(evaluator.evaluate(session, key))
                latency = (time.perf_counter() - start) * 1000
                session.rollback()  # end the read transaction before the write
                # NOTE: the beat first: it locks the run row, so no worker can take the run over
                # between our check that it is still ours and the item's commit.
                beat(session, run_id, owner, items_done=EvalRun.items_done + 1)
                session.add(
                    EvalItem(
                        run_id=run_id,
                        tenant_id=tenant_id,
                        variant=variant["label"],
                        item_key=key,
                        query=result.query,
                        output=result.output,
                        metrics=result.metrics,
                        latency_ms=round(latency, 2),
                        tokens=result.tokens,
                        worker=ctx.worker,
                    )
                )
    _finish(ctx, run_id, owner, kind, variants)


def aggregate(session: Session, run_id: uuid.UUID, variants: list[dict]) -> dict:
    """Mean metrics, latency and tokens per variant, from the stored items."""
    out = {}
    for variant in variants:
        rows = session.execute(
            select(EvalItem.metrics, EvalItem.latency_ms, EvalItem.tokens).where(
                EvalItem.run_id == run_id, EvalItem.variant == variant["label"]
            )
        ).all()
        out[variant["label"]] = {
            **mean_metrics(r.metrics for r in rows),
            **latency_summary([r.latency_ms for r in rows], [r.tokens for r in rows]),
            "items": len(rows),
        }
    return out


def _finish(ctx: RunContext, run_id: uuid.UUID, owner: str, kind: str, variants: list[dict]) -> None:
    with session_scope(ctx.sessions) as session:
        by_variant = aggregate(session, run_id, variants)
        metrics = {"variants": by_variant, **by_variant[variants[0]["label"]]}
        if len(variants) > 1:
            metrics["sweep"] = sweep_table(kind, variants, by_variant)
        beat(session, run_id, owner, metrics=metrics, progress={"stage": "done"})
        session.execute(update(EvalRun).where(EvalRun.id == run_id).values(status=JobStatus.succeeded))


def _cleanup(ctx: RunContext, run_id: uuid.UUID) -> None:
    """Drop the run's throwaway collection once the run is over (kept while it may resume)."""
    with session_scope(ctx.sessions) as session:
        run = session.get(EvalRun, run_id)
        if run is not None and run.status in OPEN:
            return
        throwaway = run.config.get("throwaway_collection") if run is not None else None
        if throwaway:
            session.execute(delete(Collection).where(Collection.id == uuid.UUID(throwaway)))
