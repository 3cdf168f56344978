"""Follow-up questions made stand-alone for retrieval, without losing what they ask about.

A small generator asked to rewrite "Which sensor does it add?" may answer with the subject lost
("The user's last question is about the user's last question."), and retrieval then searches for
nothing. A rewrite is kept only when it keeps the question's own content words, adds some (the
subject it resolved) and no talk about the conversation; otherwise the search runs on the last
user turn joined with the question, which keeps both the subject (named earlier) and what is
asked now.
"""

from __future__ import annotations

from agents.qa.sentences import content_words

# Words of a rewrite that talks about the conversation rather than asking the question.
_META = frozenset({"user", "question", "conversation", "query", "rewrite", "rewritten", "assistant"})
KEEP_SHARE = 0.5  # of the question's content words a rewrite must keep


def keeps_subject(question: str, rewrite: str) -> bool:
    """Whether `rewrite` may stand for `question` in retrieval."""
    asked = content_words(question)
    words = content_words(rewrite)
    if not words or (words & _META) - asked or words <= asked:
        return False  # empty, about the conversation, or adding nothing the question lacked
    return len(asked & words) >= KEEP_SHARE * len(asked)


def joined_with_last_turn(question: str, history: list[dict]) -> str:
    """The last user turn before `question`, then `question`: a rewrite that cannot lose either."""
    last = next((t["content"] for t in reversed(history) if t.get("role") == "user"), "")
    return f"{last.strip()} {question.strip()}".strip()


def standalone(question: str, rewrite: str, history: list[dict]) -> tuple[str, str]:
    """(the query retrieval uses, how it was made: `rewrite` or `joined`)."""
    line = rewrite.strip().splitlines()[0].strip() if rewrite.strip() else ""
    if line and keeps_subject(question, line):
        return line, "rewrite"
    return joined_with_last_turn(question, history), "joined"
