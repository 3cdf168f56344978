"""Completeness: does an answer speak of every thing its question names?

The claim check (claims.py) judges what an answer says, never what it leaves out: asked about two
things, a small model often describes one of them, well supported, and stops (SmolLM2 on the
two-search tasks of `benchmarks.agents`, where such answers were the failures the claim check let
through). A question's named things are its runs of capitalised words past the sentence's first
word ("Find the documents about Kenneth Dyson and about Ramón Calderón" names two) and its quoted
strings. One counts as mentioned when the answer holds at least half of its words (case and
accents aside).

NOTE: only a question naming two or more things is judged. A lone name the answer leaves out is
usually a refusal or a generic answer, which the refusal and claim checks see. Acronyms count as
names: "What is the KV cache block size, and which backend does paged attention use on CPU?" needs
an answer mentioning both "KV" and "CPU", so a right answer leaving out "CPU" escalates (in a
cascade: a needless escalation, never a wrong answer).
"""

from __future__ import annotations

import re
import unicodedata

from agents.qa.sentences import sentence_spans

_WORD = re.compile(r"\w[\w'’.-]*\w|\w")
_QUOTED = re.compile(r"[\"“«]([^\"”»]{2,80})[\"”»]")
# Lower-case words that may join the capitalised words of one name ("Bank of England", "Rio de Janeiro").
_JOINERS = frozenset({"of", "de", "da", "del", "der", "van", "von", "la", "le", "du", "the"})


def _capitalised(word: str) -> bool:
    return word[0].isupper() or word[0].isdigit()


def named_things(question: str) -> list[str]:
    """The names and quoted strings of `question`, in order, without repeats."""
    found: list[str] = [m.strip() for m in _QUOTED.findall(question)]
    rest = _QUOTED.sub(" ", question)
    for start, end in sentence_spans(rest):
        words = _WORD.findall(rest[start:end])
        run: list[str] = []
        for word in [*words[1:], ""]:  # the first word is capitalised as any sentence's is
            if word and (_capitalised(word) or (run and word in _JOINERS)):
                run.append(word)
                continue
            while run and run[-1] in _JOINERS:
                run.pop()
            if run:
                found.append(" ".join(run))
            run = []
    return list(dict.fromkeys(found))


def _fold(word: str) -> str:
    """Lower case without accents: a model may write "Calderon" for "Calderón"."""
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _mentioned(thing: str, answer: str) -> bool:
    words = [_fold(w) for w in _WORD.findall(thing) if w not in _JOINERS]
    said = {_fold(w) for w in _WORD.findall(answer)}
    return sum(w in said for w in words) * 2 >= len(words)


def missing_things(question: str, answer: str) -> list[str]:
    """The things `question` names that `answer` never mentions; [] when it names fewer than two."""
    things = named_things(question)
    if len(things) < 2:
        return []
    return [t for t in things if not _mentioned(t, answer)]
