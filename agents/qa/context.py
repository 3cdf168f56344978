"""The `context` report of an answer: what the prompt held, in tokens, and what was left out and why.

Nothing is cut in silence: a source that did not fit the sources budget, and history turns beyond
`history_turns`, are listed with the reason, so a user can tell "not in the documents" from "not
in the prompt".
"""

from __future__ import annotations

from collections.abc import Callable

from agents.qa.sources import Source, render_source


def context_report(
    instructions: str,
    question: str,
    history: list[dict],
    history_dropped: int,
    sources: list[Source],
    ranked: list[Source],
    budget_tokens: int,
    count_tokens: Callable[[str], int],
) -> dict:
    """Tokens per part of the prompt; `ranked` are all retrieved sources, `sources` those kept."""
    kept = {s.chunk_id for s in sources}
    shown = [
        {"number": s.number, "chunk_id": s.chunk_id, "tokens": count_tokens(render_source(s))}
        for s in sources
    ]
    used = sum(s["tokens"] for s in shown)
    dropped = [
        {
            "chunk_id": s.chunk_id,
            "document_id": s.document_id,
            "tokens": count_tokens(render_source(s)),
            "reason": f"sources budget: {used} of {budget_tokens} tokens were used by better-ranked sources",
        }
        for s in ranked
        if s.chunk_id not in kept
    ]
    return {
        "system_tokens": count_tokens(instructions),
        "sources": shown,
        "sources_tokens": used,
        "retrieved": len(ranked),
        "used": len(sources),
        "token_budget": budget_tokens,
        "dropped_sources": dropped,
        "history_turns": len(history),
        "history_tokens": sum(count_tokens(t["content"]) for t in history),
        "history_dropped_turns": history_dropped,
        "history_dropped_reason": "history_turns setting" if history_dropped else None,
        "question_tokens": count_tokens(question),
    }
