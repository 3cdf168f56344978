"""Prompt layout for grounded answers, built for prefix caching.

NOTE: the system instructions are a constant and come first, so every request shares them
byte-for-byte and the engine's prefix cache serves them; then the sources (stable order), then
the conversation, then the question.
"""

from __future__ import annotations

from agents.qa.sources import Source, render_source
from core.tracing import traced

INSTRUCTIONS = (
    "You are Groundwork, an assistant that answers questions using only the numbered sources "
    "provided below. Rules:\n"
    "- Use only facts stated in the sources. Do not use outside knowledge.\n"
    "- After each sentence that uses a source, cite it with its number in square brackets, "
    "like [1] or [2][3].\n"
    "- If the sources do not contain the answer, say that the documents do not contain it.\n"
    "- Be concise: one to three sentences.\n"
    "Example: if source [2] says 'The bridge opened in 1932.', answer 'The bridge opened in 1932 [2].'"
)

QUOTE_INSTRUCTIONS = (
    "You are Groundwork, an assistant that answers questions by quoting the numbered sources "
    "provided below. Answer with one to three whole sentences copied word for word from the sources, "
    "the ones that best answer the question, each followed by its source number in square brackets."
)

NO_ANSWER = "The documents in this collection do not contain an answer to this question."


@traced("qa.prompt")
def build_messages(
    question: str, sources: list[Source], history: list[dict] | None = None, instructions: str = INSTRUCTIONS
) -> list[dict]:
    """Chat messages: instructions + sources (system), prior turns, then the question."""
    rendered = "\n".join(render_source(s) for s in sources)
    system = f"{instructions}\n\nSources:\n{rendered}"
    messages = [{"role": "system", "content": system}]
    for turn in history or []:
        messages.append({"role": turn["role"], "content": turn["content"]})
    messages.append({"role": "user", "content": question})
    return messages


REWRITE_INSTRUCTIONS = (
    "Rewrite the user's last question as one stand-alone search query that can be understood "
    "without the conversation. Reply with the query only."
)


def build_rewrite_messages(question: str, history: list[dict]) -> list[dict]:
    """Messages asking the generator for a stand-alone version of a follow-up question."""
    transcript = "\n".join(f"{t['role']}: {t['content']}" for t in history[-6:])
    return [
        {"role": "system", "content": REWRITE_INSTRUCTIONS},
        {"role": "user", "content": f"Conversation:\n{transcript}\n\nLast question: {question}"},
    ]
