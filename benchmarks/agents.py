"""Agents: `python -m benchmarks.agents [--quick] [--limit N] [--offset N] [--tasks N]
[--tool-format json,python] [--auto] [--tool-relevance T] [--skip-bfcl] [--skip-tasks]`.

Two parts, both on the in-process engine with the packaged model (settings `llm_model`):

1. Tool calls on BFCL (../shared/eval/bfcl-dev: live_simple, live_multiple, irrelevance), with and
   without grammar constraints. Constrained: `tool_choice` required (irrelevance cases also get a
   `final_answer` escape, as our agents do); unconstrained: the same tools prompt, free text, calls
   parsed from `<tool_call>` blocks; with `--auto`, also `tool_choice` auto (constrained calls or a
   text answer, no `final_answer`: what an API client gets); with `--tool-relevance T`, also auto
   rows where the model is first asked whether a tool fits (inference/tool_relevance.py; written
   to `.tool-relevance.json`). Schema-valid rate (calls that parse
   and validate), BFCL AST accuracy (function name, required arguments, allowed values; no extra
   arguments) and irrelevance accuracy (no function called). Each row once per call layout in `--tool-format`:
   `<tool_call>` JSON blocks or a Python list of calls (inference/grammar/python_calls.py), both
   in the same run.
2. Multi-step tasks built from dbpedia-entity-subset: each asks for two entities' documents by
   name, so it needs two searches; gold = both documents (calls in `agents.tool_call_format`).
   ReAct vs ReWOO vs Plan-and-Execute:
   success (both gold documents cited or both titles in the answer), LLM calls, prompt and
   completion tokens, wall time per task; and the claim check an answered run gets on the platform
   (agents/runs/grounding.py): its sentences, the unsupported ones, the task's names the answer
   leaves out (`missing`), whether `qa.cascade` would escalate (`flagged`: unsupported claims or
   a name left out), and how the flag agrees with failed tasks.

Writes benchmarks/results/agents.json (agents.<model>.json for another `llm_model`, e.g. a GGUF path in
GROUNDWORK_LLM_MODEL; `.python-calls` before `.json` for the tasks in Python calls,
GROUNDWORK_AGENTS__TOOL_CALL_FORMAT=python; `.offset-N` with --offset N)
and prints tables; a part skipped with --skip-* is kept from the earlier file (under "carried_over").
Tasks alternate the agent order per task (ABC, BCA, CAB) so that machine noise does not favour one
agent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import tempfile
import time
import uuid
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console
from rich.table import Table

from agents.chat_model import AgentChatModel
from agents.graphs import BUILDERS
from agents.graphs.common import AgentDeps, Budgets
from agents.qa.cascade import too_unsupported
from agents.qa.completeness import missing_things
from agents.runs.grounding import check_answer
from agents.tools import FINAL_ANSWER, ToolContext, final_answer_tool
from evals.bfcl import BfclCase, ast_match, load_category
from retrieval.models import RetrievalModels

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
RESULTS = Path(__file__).parent / "results" / "agents.json"
DEFAULT_TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")  # created by migration 0001
BFCL_CATEGORIES = ("live_simple", "live_multiple", "irrelevance")
console = Console()


# --- BFCL ----------------------------------------------------------------------------------------


def load_bfcl(category: str, limit: int, offset: int = 0) -> list[BfclCase]:
    cases = load_category(EVAL / "bfcl-dev", category)
    random.Random(0).shuffle(cases)
    return cases[offset : offset + limit]


async def bfcl(
    backend,
    limit: int,
    categories: list[str],
    modes: list[str],
    formats: list[str],
    offset: int = 0,
    tool_relevance: float | None = None,
) -> dict:
    results = {}
    for mode, tool_format in [(m, f) for m in modes for f in formats]:
        constrained = mode != "free"
        model = AgentChatModel(
            backend,
            max_tokens=512,
            constrained=constrained,
            tool_format=tool_format,
            tool_relevance=tool_relevance if mode == "relevance" else None,  # "auto", asked first
        )
        for category in categories:
            rows = []
            for case in load_bfcl(category, limit, offset):
                # "auto": the tools as an OpenAI client sends them, the model free to answer in text.
                escape = category == "irrelevance" and mode == "grammar"
                tools = case.tools + ([final_answer_tool()] if escape else [])
                try:
                    choice = "auto" if mode in ("auto", "relevance") else "required"
                    turn = await model.call(case.messages, tools, choice, parallel=True)
                except Exception as exc:  # a schema xgrammar cannot compile counts as a failed case
                    rows.append({"id": case.id, "error": f"{type(exc).__name__}: {exc}"[:200]})
                    continue
                calls = [c for c in turn.tool_calls if c.name != FINAL_ANSWER]
                rows.append(
                    {
                        "id": case.id,
                        "called": bool(calls),
                        "valid": bool(calls) and all(c.error is None for c in calls),
                        "ast": category != "irrelevance"
                        and ast_match([(c.name, c.arguments) for c in calls], case.gold),
                        "tokens": turn.usage.prompt_tokens + turn.usage.completion_tokens,
                        "ms": round(turn.ms),
                        "finish_reason": turn.finish_reason,
                        "call_errors": [c.error for c in calls if c.error],
                        "calls": [{"name": c.name, "arguments": c.arguments} for c in calls],
                    }
                )
            called = [r for r in rows if r.get("called")]
            summary = {
                "cases": len(rows),
                "called": len(called),
                "schema_valid_rate": round(sum(r["valid"] for r in called) / max(1, len(called)), 3),
                "errors": sum("error" in r for r in rows),
                "mean_ms": round(sum(r.get("ms", 0) for r in rows) / max(1, len(rows))),
            }
            if category == "irrelevance":
                summary["irrelevance_accuracy"] = round(
                    sum(not r.get("called") for r in rows) / max(1, len(rows)), 3
                )
            else:
                summary["ast_accuracy"] = round(sum(r.get("ast", False) for r in rows) / max(1, len(rows)), 3)
            key = f"{category}/{mode}/{tool_format}"
            results[key] = {**summary, "rows": rows}
            console.print(key, {k: v for k, v in summary.items()})
    return results


# --- multi-step tasks ----------------------------------------------------------------------------


def build_tasks(n_tasks: int, distractors: int) -> tuple[list[dict], list[dict]]:
    """Documents (gold pairs + distractors) and tasks naming two entities each."""
    rows = [json.loads(line) for line in (EVAL / "dbpedia-entity-subset" / "corpus.jsonl").open()]
    rows = [r for r in rows if r.get("title") and len(r.get("text", "")) > 80 and len(r["title"]) < 40]
    random.Random(1).shuffle(rows)
    gold, rest = rows[: 2 * n_tasks], rows[2 * n_tasks : 2 * n_tasks + distractors]
    tasks = []
    for i in range(n_tasks):
        a, b = gold[2 * i], gold[2 * i + 1]
        tasks.append(
            {
                "task": f"Find the documents about {a['title']} and about {b['title']}; say what each is.",
                "gold": [a["_id"], b["_id"]],
                "titles": [a["title"], b["title"]],
            }
        )
    return tasks, gold + rest


def ingest(settings, sessions, models: RetrievalModels, docs: list[dict]) -> uuid.UUID:
    from retrieval.corpus import CorpusDoc, add_documents, build_prefix_index, create_collection

    embedder = models.embedder(settings.embedding_model)
    texts = [f"{d['title']}\n{d['text'][:600]}" for d in docs]
    vectors = embedder.encode(texts)
    with sessions() as s:
        dim = vectors.shape[1]
        collection = create_collection(
            s,
            DEFAULT_TENANT,
            f"agents-bench-{uuid.uuid4().hex[:6]}",
            settings.embedding_model,
            dim,
            min(dim, 384),
        )
        add_documents(
            s, collection, [CorpusDoc(d["_id"], d["text"][:600], d["title"]) for d in docs], vectors
        )
        s.commit()
        build_prefix_index(s.get_bind(), collection.id, collection.index_dim)
        return collection.id


def _succeeded(task: dict, out: dict) -> bool:
    cited = {c.get("source_id") for c in out.get("citations") or []}
    answer = (out.get("answer") or "").lower()
    return all(g in cited or t.lower() in answer for g, t in zip(task["gold"], task["titles"], strict=True))


async def run_tasks(
    settings, sessions, models: RetrievalModels, backend, collection_id, tasks: list[dict]
) -> dict:
    kinds = list(BUILDERS)
    rows = {k: [] for k in kinds}
    for i, task in enumerate(tasks):
        order = kinds[i % 3 :] + kinds[: i % 3]
        for kind in order:
            context = ToolContext(sessions, settings, DEFAULT_TENANT, [collection_id], backend, models=models)
            model = AgentChatModel(backend, tool_format=settings.agents.tool_call_format)
            deps = AgentDeps(model, context, ["search"], [], Budgets(max_steps=6))
            graph = BUILDERS[kind]().compile(checkpointer=InMemorySaver())
            config = {"configurable": {"thread_id": uuid.uuid4().hex, "deps": deps}, "recursion_limit": 100}
            start = time.perf_counter()
            try:
                out = await graph.ainvoke({"task": task["task"], "usage": {}}, config)
            except Exception as exc:  # counted as a failed task
                out = {"finish_reason": "error", "detail": str(exc)}
            usage = out.get("usage", {})
            # The claim check the platform runs on an answered run (agents/runs/grounding.py), and
            # whether qa.cascade would escalate on it: does the flag find the failed tasks?
            answered = out.get("finish_reason") == "answered"
            claims = await check_answer(out) if answered else []
            missing = missing_things(task["task"], out.get("answer") or "") if answered else []
            rows[kind].append(
                {
                    "task": i,
                    "success": _succeeded(task, out),
                    "finish_reason": out.get("finish_reason"),
                    "sentences": len(claims),
                    "unsupported": sum(c["supported"] is False for c in claims),
                    "missing": missing,
                    "flagged": too_unsupported(claims, settings.qa) or bool(missing),
                    "llm_calls": usage.get("llm_calls", 0),
                    "searches": usage.get("tool_calls", 0),
                    "prompt_tokens": usage.get("prompt_tokens", 0),
                    "completion_tokens": usage.get("completion_tokens", 0),
                    "wall_s": round(time.perf_counter() - start, 2),
                    "plans": [s["plan"] for s in out.get("steps", []) if s.get("type") == "plan"],
                    "answer": (out.get("answer") or "")[:300],
                }
            )
        console.print(f"task {i + 1}/{len(tasks)}", {k: rows[k][-1]["success"] for k in kinds})
    summary = {}
    for kind, items in rows.items():
        n = max(1, len(items))
        summary[kind] = {
            "tasks": len(items),
            "success_rate": round(sum(r["success"] for r in items) / n, 3),
            "answered_rate": round(sum(r["finish_reason"] == "answered" for r in items) / n, 3),
            "flagged": sum(r["flagged"] for r in items),
            "incomplete": sum(bool(r.get("missing")) for r in items),
            "flagged_failed": sum(r["flagged"] and not r["success"] for r in items),
            "unflagged_failed": sum(
                r["finish_reason"] == "answered" and not r["flagged"] and not r["success"] for r in items
            ),
            **{
                f"mean_{k}": round(sum(r[k] for r in items) / n, 1)
                for k in ("llm_calls", "searches", "prompt_tokens", "completion_tokens", "wall_s")
            },
        }
        summary[kind]["mean_tokens"] = round(
            summary[kind]["mean_prompt_tokens"] + summary[kind]["mean_completion_tokens"], 1
        )
    react, rewoo = summary["react"]["mean_tokens"], summary["rewoo"]["mean_tokens"]
    return {"summary": summary, "react_over_rewoo_tokens": round(react / max(1.0, rewoo), 2), "rows": rows}


# --- main ----------------------------------------------------------------------------------------


def cpu_info() -> dict:
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line.split(":", 1)[1]
                break
    except OSError:
        pass
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "fma")
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "flags": [f for f in wanted if f in flags.split()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="Few cases: --limit 5 --tasks 6.")
    parser.add_argument("--limit", type=int, default=40, help="BFCL cases per category.")
    parser.add_argument(
        "--offset",
        type=int,
        default=0,
        help="Skip this many BFCL cases of each category's seeded order (cases a prompt was not tuned on).",
    )
    parser.add_argument("--tasks", type=int, default=30, help="Multi-step tasks.")
    parser.add_argument(
        "--distractors", type=int, default=200, help="Extra documents in the task collection."
    )
    parser.add_argument("--categories", default=",".join(BFCL_CATEGORIES), help="BFCL categories.")
    parser.add_argument(
        "--free", action=argparse.BooleanOptionalAction, default=True, help="Also the unconstrained rows."
    )
    parser.add_argument(
        "--tool-format",
        default="json,python",
        help="BFCL rows per call layout (agents/chat_model.py); the tasks use agents.tool_call_format.",
    )
    parser.add_argument(
        "--auto",
        action="store_true",
        help="Also BFCL rows with tool_choice auto (as API clients send it; no final_answer escape).",
    )
    parser.add_argument(
        "--tool-relevance",
        type=float,
        default=None,
        help="Also BFCL rows with tool_choice auto where the model is first asked whether a tool fits "
        "(inference/tool_relevance.py), at this threshold; results in a file of their own.",
    )
    parser.add_argument("--skip-bfcl", action="store_true")
    parser.add_argument("--skip-tasks", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.limit, args.tasks = min(args.limit, 5), min(args.tasks, 6)

    from cli.db import upgrade_database
    from core.database import make_engine, make_session_factory
    from core.runtime import open_database
    from core.settings import get_settings
    from inference.client import LocalChatBackend
    from inference.provider import start_local_engine

    settings = get_settings().model_copy(
        update={"data_dir": Path(tempfile.mkdtemp(prefix="gw-agents-bench-"))}
    )
    engine_client = start_local_engine(settings)
    backend = LocalChatBackend(engine_client)
    report = {
        "model": settings.llm_model,
        "machine": cpu_info(),
        "args": vars(args),
        "task_tool_format": settings.agents.tool_call_format,
    }
    default = type(settings).model_fields["llm_model"].default
    model = settings.llm_model
    name = Path(model).name.removesuffix(".gguf")  # not `.stem`: qwen2.5-coder-1.5b is a name, not a file
    out = RESULTS if model == default else RESULTS.with_suffix(f".{name}.json")
    if settings.agents.tool_call_format == "python":
        out = out.with_suffix(".python-calls.json")  # the tasks in each layout: a file of their own
    if args.tool_relevance is not None:
        out = out.with_suffix(".tool-relevance.json")
    if args.offset:  # cases held out from tuning: beside the tuned run, not over it
        out = out.with_suffix(f".offset-{args.offset}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        if not args.skip_bfcl:
            report["bfcl"] = asyncio.run(
                bfcl(
                    backend,
                    args.limit,
                    args.categories.split(","),
                    ["grammar"]
                    + ["free"] * args.free
                    + ["auto"] * args.auto
                    + ["relevance"] * (args.tool_relevance is not None),
                    args.tool_format.split(","),
                    args.offset,
                    args.tool_relevance,
                )
            )
            out.write_text(json.dumps(carry_over(report, out), indent=1))  # a long run keeps its first part
        if not args.skip_tasks:
            database = open_database(settings)
            upgrade_database(database.url)
            sessions = make_session_factory(make_engine(database.url))
            tasks, docs = build_tasks(args.tasks, args.distractors)
            models = RetrievalModels()
            collection_id = ingest(settings, sessions, models, docs)
            report["tasks"] = asyncio.run(
                run_tasks(settings, sessions, models, backend, collection_id, tasks)
            )
            database.close()
    finally:
        engine_client.shutdown()
    out.write_text(json.dumps(carry_over(report, out), indent=1))
    print_tables(report)


def carry_over(report: dict, out: Path) -> dict:
    """The report, with the parts this run skipped taken from the earlier results file (marked, with
    the machine each ran on), so that `--skip-bfcl` re-measures the tasks without losing the rest."""
    earlier = json.loads(out.read_text()) if out.exists() else {}
    parts = [k for k in ("bfcl", "tasks") if k not in report and k in earlier]
    if not parts:
        return report
    machines = {k: earlier.get("carried_over", {}).get(k, earlier.get("machine")) for k in parts}
    return {**report, **{k: earlier[k] for k in parts}, "carried_over": machines}  # part -> its machine


def print_tables(report: dict) -> None:
    if "bfcl" in report:
        table = Table(title=f"BFCL tool calls ({report['model']})")
        columns = (
            "category",
            "mode",
            "layout",
            "cases",
            "called",
            "schema-valid",
            "AST / irrelevance acc.",
            "ms",
        )
        for column in columns:
            table.add_column(column)
        for key, r in report["bfcl"].items():
            category, mode, layout = (key.split("/") + ["json"])[:3]  # files before layouts: json
            accuracy = r.get("ast_accuracy", r.get("irrelevance_accuracy"))
            table.add_row(
                category,
                mode,
                layout,
                str(r["cases"]),
                str(r["called"]),
                f"{r['schema_valid_rate']:.1%}",
                f"{accuracy:.1%}",
                str(r["mean_ms"]),
            )
        console.print(table)
    if "tasks" in report:
        table = Table(title="Multi-step tasks (two searches each)")
        for column in (
            "agent",
            "tasks",
            "success",
            "LLM calls",
            "searches",
            "prompt tok",
            "compl. tok",
            "wall s",
            "flagged (failed)",
            "answered, failed, unflagged",
        ):
            table.add_column(column)
        for kind, s in report["tasks"]["summary"].items():
            table.add_row(
                kind,
                str(s["tasks"]),
                f"{s['success_rate']:.0%}",
                str(s["mean_llm_calls"]),
                str(s["mean_searches"]),
                str(s["mean_prompt_tokens"]),
                str(s["mean_completion_tokens"]),
                str(s["mean_wall_s"]),
                f"{s['flagged']} ({s['flagged_failed']})",
                str(s["unflagged_failed"]),
            )
        console.print(table)
        console.print(f"ReAct / ReWOO tokens per task: {report['tasks']['react_over_rewoo_tokens']}x")


if __name__ == "__main__":
    main()
