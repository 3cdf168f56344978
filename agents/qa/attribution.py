"""Citation attribution for answers whose model did not cite.

Small generators often state a source's facts without writing `[n]`. Each uncited sentence whose
content words come mostly from one source gets that source's marker, so the user can still click
through; such citations are flagged `attributed` so they are not mistaken for the model's own.
"""

from __future__ import annotations

import re

from agents.qa.sources import Source

# A sentence ends at . ! or ? followed by a space or the end ("4.2" does not end one), or at a newline.
_SENTENCE = re.compile(r"[^\n]+?(?:[.!?]+(?=\s|$)|(?=\n)|$)")
_WORD = re.compile(r"\w+", re.UNICODE)
_MARKER = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_STOP = frozenset(
    "the a an and or of to in on at for by with from is are was were be been it its this that these "
    "those as into than then so such their there they them he she his her we our you your not no "
    "do does did has have had can could will would should may might also which who whom what when "
    "where why how".split()
)


def content_words(text: str) -> set[str]:
    """Lowercased words minus stop words, crudely singularised; numbers always count (a copied
    figure is the strongest sign of where a sentence came from)."""
    words = set()
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if word.isdigit() or (len(word) > 2 and word not in _STOP):
            words.add(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return words


def attribute(answer: str, sources: list[Source], min_overlap: float = 0.4) -> tuple[str, set[int]]:
    """The answer with markers added to uncited sentences, and the source numbers so added."""
    vocab = {s.number: content_words(s.text) for s in sources}
    added: set[int] = set()
    out: list[str] = []
    last = 0
    for match in _SENTENCE.finditer(answer):
        sentence = match.group()
        out.append(answer[last : match.start()])
        last = match.end()
        words = content_words(sentence)
        if _MARKER.search(sentence) or len(words) < 2:
            out.append(sentence)
            continue
        number, overlap = max(
            ((n, len(words & v) / len(words)) for n, v in vocab.items()), key=lambda x: x[1], default=(0, 0.0)
        )
        if overlap < min_overlap:
            out.append(sentence)
            continue
        added.add(number)
        body = sentence.rstrip()
        end = len(body.rstrip(".!?"))
        out.append(f"{body[:end]} [{number}]{body[end:]}{sentence[len(body) :]}")
    out.append(answer[last:])
    return "".join(out), added
