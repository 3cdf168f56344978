"""`benchmarks.followups`: how a follow-up's search query was made."""

from __future__ import annotations

import pytest

from benchmarks.followups import query_kind

pytestmark = pytest.mark.unit

HISTORY = [
    {"role": "user", "content": "Does aspirin lower stroke risk in the elderly?"},
    {"role": "assistant", "content": "It lowers it slightly [1]."},
]


def test_a_query_is_the_question_the_joined_fallback_or_a_rewrite():
    question = "What did the study conclude?"
    assert query_kind(question, question, HISTORY) == "question"
    joined = "Does aspirin lower stroke risk in the elderly? What did the study conclude?"
    assert query_kind(joined, question, HISTORY) == "joined"
    rewrite = "What did the aspirin stroke-risk study in the elderly conclude?"
    assert query_kind(rewrite, question, HISTORY) == "rewrite"
