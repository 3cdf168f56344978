"""Evaluating one item: a retrieval query against its judgements, a question through the real
/v1/ask pipeline (retrieve -> no-answer gate -> generate -> cite) against its reference, or an
agent's tool-call turn against BFCL's gold call."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from agents.chat_model import AgentChatModel
from agents.qa.pipeline import AskPipeline, AskRequest
from agents.qa.retrieve import retrieve_sources
from agents.tools import FINAL_ANSWER, final_answer_tool
from core.models import Collection
from evals.bfcl import BfclCase, ast_match
from evals.datasets import BeirDataset
from evals.judge import judge_faithfulness
from evals.metrics import answer_metrics, retrieval_per_query
from retrieval.config import resolve_config
from retrieval.pipeline import SearchPipeline
from retrieval.service import SearchRequest

EVAL_DEPTH = 100  # ranked documents kept per query: Recall@100 needs them
_CITATION_FIELDS = ("citation", "source_id", "chunk_id", "title", "attributed")  # not the quoted text


@dataclass
class ItemResult:
    query: str
    output: dict
    metrics: dict
    tokens: int = 0


def dedupe_documents(source_ids: list[str], scores: list[float]) -> list[tuple[str, float]]:
    """Chunks -> documents, best chunk first (a document ranks where its best chunk does)."""
    seen: dict[str, float] = {}
    for sid, score in zip(source_ids, scores, strict=True):
        seen.setdefault(sid, score)
    return list(seen.items())


class RetrievalEvaluator:
    def __init__(self, ctx, collection: Collection, overrides: dict, data: BeirDataset) -> None:
        config = resolve_config(ctx.settings.retrieval, collection.retrieval, overrides)
        # Depth for the metrics, unless the variant sweeps the final k itself.
        top_k = overrides.get("top_k", max(config.top_k, EVAL_DEPTH))
        self.pipeline = SearchPipeline(config.model_copy(update={"top_k": top_k}), ctx.models)
        self.collection, self.data = collection, data

    async def evaluate(self, session: Session, key: str) -> ItemResult:
        query = self.data.queries[key]
        result = await self.pipeline.run(session, self.collection, query)
        ranked = dedupe_documents([r.source_id for r in result.results], [r.score for r in result.results])
        metrics = retrieval_per_query({key: [d for d, _ in ranked]}, {key: self.data.qrels[key]})
        return ItemResult(
            query,
            {"ranked": [[d, round(s, 6)] for d, s in ranked]},
            metrics.get(key, {}),
        )


class AnswerEvaluator:
    def __init__(
        self,
        ctx,
        collection: Collection,
        overrides: dict,
        items: dict,
        generation: dict,
        judge: dict | None = None,
    ) -> None:
        self.ctx, self.collection, self.items = ctx, collection, items
        self.overrides, self.generation, self.judge = overrides, generation, judge

    async def evaluate(self, session: Session, key: str) -> ItemResult:
        item = self.items[key]
        settings = self.ctx.settings
        backend = self.ctx.llm.backend()
        retrieval_llm = self.ctx.llm.retrieval_backend(generator=backend)
        search = SearchRequest(query=item.question, options=self.overrides)

        async def retrieve(query: str):
            request = search.model_copy(update={"query": query})
            return await retrieve_sources(
                session, settings, [self.collection], request, self.ctx.models, retrieval_llm
            )

        pipeline = AskPipeline(retrieve, backend, settings.qa)
        request = AskRequest(
            question=item.question,
            max_tokens=self.generation.get("max_tokens"),
            temperature=self.generation.get("temperature", 0.0),
            seed=self.generation.get("seed", 0),
            cache_salt=str(self.collection.tenant_id),
        )
        events = [e async for e in pipeline.run(request)]
        done, sources = events[-1], events[0].get("sources", [])
        cited = list(dict.fromkeys(c.get("source_id") for c in done["citations"] if c.get("source_id")))
        metrics = answer_metrics(done["answer"], item.answer, not done["grounded"], cited, item.gold_docs)
        usage = done["usage"]
        output = {
            "answer": done["answer"],
            "reference": item.answer,
            "citations": [{k: c.get(k) for k in _CITATION_FIELDS} for c in done["citations"]],
            "cited_docs": cited,
            "gold_docs": item.gold_docs,
            "grounded": done["grounded"],
            "usage": usage,
            "timings": done["timings"],
        }
        tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        if self.judge and done["grounded"]:
            repeats, temperature = self.judge["repeats"], self.judge["temperature"]
            judged = await judge_faithfulness(
                backend, done["answer"], done["citations"], sources, repeats, temperature
            )
            output["judge_tokens"] = judged.pop("judge_tokens")
            metrics = {**metrics, **judged}
        return ItemResult(item.question, output, metrics, tokens)


class AgentEvaluator:
    """One model turn of our agents (a required tool choice, `final_answer` among the tools, the
    in-process engine constraining it by the schemas, several calls allowed) on a BFCL case.

    Metrics: `called` (a function other than final_answer), `schema_valid` (of a turn that called:
    every call parses and validates), `ast_accuracy` (BFCL's AST rule over all the calls), and for
    cases without a gold call `irrelevance_accuracy` (no function called); `success` is the last
    two together, `steps` the model turns.
    """

    def __init__(self, ctx, cases: dict[str, BfclCase], generation: dict) -> None:
        self.ctx, self.cases = ctx, cases
        self.max_tokens = generation.get("max_tokens") or 512

    async def evaluate(self, session: Session, key: str) -> ItemResult:
        case = self.cases[key]
        model = AgentChatModel(
            self.ctx.llm.backend(),
            max_tokens=self.max_tokens,
            tool_format=self.ctx.settings.agents.tool_call_format,
        )
        turn = await model.call(case.messages, [*case.tools, final_answer_tool()], "required", parallel=True)
        calls = [c for c in turn.tool_calls if c.name != FINAL_ANSWER]
        called = bool(calls)
        if case.gold:
            correct = all(c.error is None for c in calls) and ast_match(
                [(c.name, c.arguments) for c in calls], case.gold
            )
        else:
            correct = not called
        metrics = {
            "success": float(correct),
            "called": float(called),
            "schema_valid": float(all(c.error is None for c in calls)) if called else None,
            "ast_accuracy": float(correct) if case.gold else None,
            "irrelevance_accuracy": None if case.gold else float(correct),
            "steps": 1.0,
        }
        question = next((m["content"] for m in reversed(case.messages) if m.get("role") == "user"), "")
        output = {
            "calls": [c.as_dict() for c in turn.tool_calls],
            "content": turn.content,
            "gold": case.gold,
            "finish_reason": turn.finish_reason,
            "usage": turn.usage.as_dict(),
        }
        tokens = turn.usage.prompt_tokens + turn.usage.completion_tokens
        return ItemResult(str(question)[:2000], output, metrics, tokens)
