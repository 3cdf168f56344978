"""Sentences and content words: the units that quote mode copies and the claim check verifies."""

from __future__ import annotations

import re

# A sentence ends at . ! or ? followed by a space or the end ("4.2" does not end one), or at a newline.
SENTENCE = re.compile(r"[^\n]+?(?:[.!?]+(?=\s|$)|(?=\n)|$)")
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    "the a an and or of to in on at for by with from is are was were be been it its this that these "
    "those as into than then so such their there they them he she his her we our you your not no "
    "do does did has have had can could will would should may might also which who whom what when "
    "where why how".split()
)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, leading/trailing whitespace excluded; never spans a newline."""
    spans = []
    for match in SENTENCE.finditer(text):
        start, end = match.span()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            spans.append((start, end))
    return spans


_CLOSERS = "\"')]\u201d\u2019"


def _ends_sentence(text: str) -> bool:
    """Whether `text`, right-stripped of spaces, ends where a sentence may end: nothing before it,
    a line break, or terminal punctuation (possibly inside closing quotes or brackets)."""
    text = text.rstrip(" \t")
    if not text or text.endswith("\n"):
        return True
    text = text.rstrip(_CLOSERS)
    return bool(text) and text[-1] in ".!?:"


def is_whole(text: str, start: int, end: int, lead: str | None = None, trail: str | None = None) -> bool:
    """Whether the span text[start:end] (from `sentence_spans`) is a whole sentence of the document
    `text` was cut from, given the document text just before (`lead`) and after (`trail`) it.

    NOTE: spans inside `text` start and end at sentence boundaries by construction; only the first
    can start mid-sentence (a chunk cut there) and only the last end mid-sentence. Without `lead` or
    `trail` (None: not looked up) a span touching that edge is taken as whole.
    """
    before = text[:start]
    if not (lead is None and not before.strip()) and not _ends_sentence((lead or "") + before):
        return False
    if text[end:].strip():
        return True  # not the last span: it ended at a boundary
    if trail is None:
        return True
    following = text[end:] + trail
    rest = following.lstrip(" \t")
    if not rest or rest.startswith("\n"):
        return True  # the document or its line ends here
    return _ends_sentence(text[start:end]) and following[0] in " \t"


def content_words(text: str) -> set[str]:
    """Lowercased words minus stop words, crudely singularised; numbers always count (a copied
    figure is the strongest sign of where a sentence came from)."""
    words = set()
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if word.isdigit() or (len(word) > 2 and word not in _STOP):
            words.add(word[:-1] if len(word) > 3 and word.endswith("s") else word)
    return words
