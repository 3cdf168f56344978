"""Citation attribution for answers whose model did not cite.

Small generators often state a source's facts without writing `[n]`. Each uncited sentence whose
content words come mostly from one source gets that source's marker, so the user can still click
through; such citations are flagged `attributed` so they are not mistaken for the model's own.
"""

from __future__ import annotations

import re

from agents.qa.sentences import SENTENCE, content_words
from agents.qa.sources import Source

_MARKER = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")


def attribute(answer: str, sources: list[Source], min_overlap: float = 0.4) -> tuple[str, set[int]]:
    """The answer with markers added to uncited sentences, and the source numbers so added."""
    vocab = {s.number: content_words(s.text) for s in sources}
    added: set[int] = set()
    out: list[str] = []
    last = 0
    for match in SENTENCE.finditer(answer):
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
