"""Quote mode: answers made only of verbatim source sentences, each followed by its marker.

The generator does not write the answer; it picks it. The candidate sentences (the retrieved
sources' sentences closest to the question) become the alternatives of an EBNF grammar, and the
engine's grammar-constrained decoding makes every output a sequence of whole candidates:

    root ::= r0_3 | r1_3 | ...            (the answer starts with any candidate)
    r0_3 ::= c0 | c0 " " (r1_2 | r2_2 ...) (then continues with a later one, at most 3 in all)
    c0   ::= "The bridge opened in 1932." " [2]"

NOTE: candidates are laid out in reading order (source, then position) and a continuation may only
take a later candidate: no sentence can repeat, which greedy small models otherwise do, and the
answer reads in document order. The grammar has candidates x max_sentences rules.

A backend that cannot apply grammars (a remote server that rejects or ignores `structured_outputs`)
gets `select_by_similarity` instead: the same candidates ranked by the embedding model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agents.qa.citations import citation_entry
from agents.qa.claims import Evidence, claim_entry
from agents.qa.sentences import content_words, is_whole, sentence_spans
from agents.qa.sources import Source

# Query and texts -> one similarity per text (the embedding model's cosine, in practice).
Similarity = Callable[[str, list[str]], list[float]]

MIN_CHARS, MAX_CHARS = 20, 600  # shorter: headings and fragments; longer: tables flattened into one line
MIN_WORDS = 4  # fewer: a table cell or a label ("Pre-TAS implementation"), which answers nothing


@dataclass(frozen=True)
class Candidate:
    source: Source
    start: int  # offsets in source.text
    end: int
    score: float = 0.0

    @property
    def text(self) -> str:
        return self.source.text[self.start : self.end]

    def rendered(self) -> str:
        """The candidate as the answer shows it: the sentence, then its source's marker."""
        return f"{self.text} [{self.source.number}]"


def _quotable(text: str) -> bool:
    return (
        MIN_CHARS <= len(text) <= MAX_CHARS
        and len(text.split()) >= MIN_WORDS
        and not any(ord(c) < 32 for c in text)
    )


def candidates(
    question: str,
    sources: list[Source],
    limit: int,
    similarity: Similarity | None = None,
    max_sources: int | None = None,
    rank_weight: float = 0.0,
) -> list[Candidate]:
    """The `limit` source sentences closest to the question, in reading order, taken from the
    `max_sources` sources whose best sentence scores highest (all sources when None). Headings and
    the document's title are not sentences: a heading can score high and answers nothing; nor is
    the piece of a sentence that a chunk boundary cut (a quote must never start or end mid-sentence).

    A sentence scores its similarity to the question minus `rank_weight` per place its source
    stands below the best in retrieval (`Source.rank`): retrieval saw the whole chunk, the sentence
    score sees one sentence, and both carry evidence.

    NOTE: one source by default. Offered sentences from every source, the packaged generator quoted
    sentences from several and cited off-topic chunks (citation precision 46% on the pubmedqa dev
    set, 17% on long_docs); the best-scoring source's own sentences hold the answer as often.
    """
    pool: list[tuple[Source, int, int]] = []
    seen: set[str] = set()
    for source in sources:
        headings = {source.title, *source.headings}
        for start, end in sentence_spans(source.text):
            text = source.text[start:end]
            if (
                _quotable(text)
                and text not in seen
                and text.lstrip("#").strip() not in headings
                and is_whole(source.text, start, end, source.lead, source.trail)
            ):
                seen.add(text)
                pool.append((source, start, end))
    if not pool:
        return []
    texts = [source.text[a:b] for source, a, b in pool]
    if similarity is not None:
        scores = list(similarity(question, texts))
    else:
        asked = content_words(question)
        scores = [len(asked & content_words(t)) / (len(asked) or 1) for t in texts]
    scores = [score - rank_weight * src.rank for score, (src, _, _) in zip(scores, pool, strict=True)]
    keep = range(len(pool))
    if max_sources is not None:
        best: dict[int, float] = {}
        for score, (source, _, _) in zip(scores, pool, strict=True):
            best[id(source)] = max(best.get(id(source), score), score)
        chosen = set(sorted(best, key=lambda k: -best[k])[:max_sources])
        keep = [i for i in keep if id(pool[i][0]) in chosen]
    best_first = sorted(keep, key=lambda i: -scores[i])[:limit]
    return [Candidate(*pool[i], score=float(scores[i])) for i in sorted(best_first)]


def _literal(text: str) -> str:
    """An EBNF string literal (xgrammar): backslash and quote escaped; candidates hold no control chars."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def quote_grammar(cands: list[Candidate], max_sentences: int, first: set[int] | None = None) -> str:
    """EBNF whose sentences are 1..max_sentences distinct candidates, in order, space-separated;
    the first one among the candidates numbered in `first` (default: any)."""
    if not cands:
        raise ValueError("quote grammar needs at least one candidate")
    n, m = len(cands), max(1, max_sentences)
    starts = [i for i in range(n) if first is None or i in first] or list(range(n))
    lines = [f"root ::= {' | '.join(f'r{i}_{m}' for i in starts)}"]
    for i, cand in enumerate(cands):
        lines.append(f"c{i} ::= {_literal(cand.text)} {_literal(f' [{cand.source.number}]')}")
        for left in range(1, m + 1):
            later = [f"r{j}_{left - 1}" for j in range(i + 1, n)] if left > 1 else []
            tail = f' | c{i} " " ({" | ".join(later)})' if later else ""
            lines.append(f"r{i}_{left} ::= c{i}{tail}")
    return "\n".join(lines)


def parse_quote(text: str, cands: list[Candidate]) -> list[Candidate] | None:
    """The candidates `text` is made of (as the grammar lays them out), or None if it is anything
    else: how an answer from a backend that ignored the grammar is recognised."""
    rendered = [c.rendered() for c in cands]
    out: list[Candidate] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        # Longest match first: one candidate may be a prefix of another.
        match = max(
            (i for i, r in enumerate(rendered) if text.startswith(r, pos)),
            key=lambda i: len(rendered[i]),
            default=None,
        )
        if match is None:
            return None
        out.append(cands[match])
        pos += len(rendered[match])
        if pos < len(text):
            if text[pos] != " ":
                return None
            pos += 1
    return out or None


def first_choices(cands: list[Candidate], margin: float) -> set[int]:
    """The candidates an answer may open with: those scoring within `margin` of the best.

    NOTE: left free, the packaged 135M generator chose its first sentence mostly by its first word
    (on the demo corpus it opened with a chunking sentence for a KV-cache question whose answer
    scored 0.66 against 0.40); the embedding ranking picks the opening, the model the rest.
    """
    if not cands:
        return set()
    top = max(c.score for c in cands)
    return {i for i, c in enumerate(cands) if c.score >= top - margin}


def select_by_similarity(cands: list[Candidate], max_sentences: int, margin: float) -> list[Candidate]:
    """Without a grammar: the best candidate and those scoring within `margin` of it, in reading order."""
    if not cands:
        return []
    top = max(c.score for c in cands)
    ranked = sorted((c for c in cands if c.score >= top - margin), key=lambda c: -c.score)[:max_sentences]
    return [c for c in cands if c in ranked]


def quote_max_tokens(cands: list[Candidate], max_sentences: int, count_tokens: Callable[[str], int]) -> int:
    """Enough tokens for the longest possible answer, so a quote is never cut mid-sentence."""
    lengths = sorted((count_tokens(c.rendered()) + 2 for c in cands), reverse=True)
    return sum(lengths[:max_sentences]) + 4


def assemble(chosen: list[Candidate]) -> tuple[str, list[dict], list[dict]]:
    """The answer with markers numbered 1, 2, ... in order of first citation, its citations and
    its claims (each quoted sentence is its own evidence).

    NOTE: built here rather than by `resolve_citations`, which rewrites every `[n]` it finds and
    would also touch reference markers inside a quoted sentence ("as shown before [3].").
    """
    numbers: dict[int, int] = {}
    pieces: list[str] = []
    claims: list[dict] = []
    pos = 0
    for cand in chosen:
        number = numbers.setdefault(cand.source.number, len(numbers) + 1)
        piece = f"{cand.text} [{number}]"
        evidence = Evidence(cand.source, cand.start, cand.end, 1.0)
        claims.append(claim_entry(piece, pos, pos + len(piece), [number], True, "quote", evidence, number))
        pieces.append(piece)
        pos += len(piece) + 1
    by_number = {c.source.number: c.source for c in chosen}
    citations = [citation_entry(by_number[n], c) for n, c in numbers.items()]
    return " ".join(pieces), citations, claims
