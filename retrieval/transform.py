"""Query transformations through an LLM chat backend (in-process engine or OpenAI-compatible URL)."""

from __future__ import annotations

import re

from core.settings.retrieval import TransformConfig
from inference.client import ChatBackend, complete_chat
from inference.protocol import SamplingParams

HYDE_PROMPT = (
    "Write a short passage (3-4 sentences) that answers the question below, as it would appear in a "
    "reference document. Write only the passage.\n\nQuestion: {query}"
)
MULTI_QUERY_PROMPT = (
    "Rewrite the search query below in {n} different ways that could find relevant documents (other "
    "words, synonyms, more specific or more general). One rewrite per line, no numbering, nothing "
    "else.\n\nQuery: {query}"
)


class HyDE:
    """Hypothetical Document Embeddings (Gao et al., 2022): dense search embeds the query together
    with an LLM-written hypothetical answer (their vectors are averaged); BM25 keeps the query."""

    name = "hyde"

    def __init__(self, config: TransformConfig, backend: ChatBackend) -> None:
        self.config = config
        self.backend = backend

    async def run(self, query: str) -> str:
        messages = [{"role": "user", "content": HYDE_PROMPT.format(query=query)}]
        params = SamplingParams(max_tokens=self.config.max_tokens, temperature=0.0)
        answer, _ = await complete_chat(self.backend, messages, params)
        return answer.strip()


def parse_rewrites(raw: str, original: str, n: int) -> list[str]:
    """The model's rewrites, cleaned of numbering/bullets, deduplicated, without the original."""
    seen = {original.strip().lower()}
    out: list[str] = []
    for line in raw.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip('"').strip()
        if line and line.lower() not in seen:
            seen.add(line.lower())
            out.append(line)
    return out[:n]


class MultiQuery:
    """Multi-query expansion: the original query plus up to `num_queries` LLM rewrites; each is
    searched and all rankings are fused by RRF."""

    name = "multi_query"

    def __init__(self, config: TransformConfig, backend: ChatBackend) -> None:
        self.config = config
        self.backend = backend

    async def run(self, query: str) -> list[str]:
        prompt = MULTI_QUERY_PROMPT.format(query=query, n=self.config.num_queries)
        params = SamplingParams(max_tokens=self.config.max_tokens, temperature=0.0)
        raw, _ = await complete_chat(self.backend, [{"role": "user", "content": prompt}], params)
        return [query, *parse_rewrites(raw, query, self.config.num_queries)]
