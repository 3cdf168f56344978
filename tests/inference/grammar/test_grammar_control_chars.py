"""xgrammar issue #800: strings with minLength/maxLength let raw control characters through.

A model that favours control-character tokens must still produce JSON whose strings carry them
only escaped. The unpatched xgrammar grammar is decoded the same way, to show the hole exists (if
that part starts failing, upstream fixed it and our workaround can go).
"""

from __future__ import annotations

import json
import re

import pytest
import torch
import xgrammar as xgr

from inference.grammar import SequenceGrammar, parse_structured_output
from tests.inference.grammar.random_model import generate

pytestmark = pytest.mark.unit

SCHEMA = {
    "type": "object",
    "properties": {
        "short": {"type": "string", "maxLength": 6},
        "long": {"type": "string", "minLength": 3},
        "both": {"type": "string", "minLength": 1, "maxLength": 4},
        "list": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 2},
    },
    "required": ["short", "long", "both", "list"],
}
# JSON allows only these four whitespace characters raw, and only between tokens.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def _control_bias(vocab: list[bytes]) -> torch.Tensor:
    """+8 on tokens holding a control character (tab/newline/CR included); +4 on tokens holding a
    quote, so that unbounded strings end within the token budget."""
    bias = torch.zeros(len(vocab))
    for token_id, raw in enumerate(vocab):
        if any(byte < 0x20 for byte in raw):
            bias[token_id] = 8.0
        elif b'"' in raw:
            bias[token_id] = 4.0
    return bias


def _decode(service, tokenizer, vocab, grammars):
    return generate(service, grammars, tokenizer, max_tokens=120, seed=7, bias=_control_bias(vocab))


def test_constrained_strings_never_hold_raw_control_characters(service, smollm2_tokenizer, decoded_vocab):
    spec = parse_structured_output(
        {"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}}
    )
    outputs = _decode(
        service, smollm2_tokenizer, decoded_vocab, [service.sequence_grammar(spec) for _ in range(24)]
    )
    finished = [o for o in outputs if o.finish_reason == "stop"]
    assert len(finished) >= 12
    for output in outputs:
        assert not RAW_CONTROL.search(output.text), repr(output.text)
    for output in finished:
        value = json.loads(output.text)  # strict: a raw \n or \t inside a string would fail here
        assert len(value["short"]) <= 6 and len(value["long"]) >= 3 and 1 <= len(value["both"]) <= 4


def test_unpatched_xgrammar_grammar_leaks_control_characters(service, smollm2_tokenizer, decoded_vocab):
    raw = xgr.Grammar.from_json_schema(json.dumps(SCHEMA), strict_mode=True, max_whitespace_cnt=1)
    compiled = xgr.GrammarCompiler(service.tokenizer_info, max_threads=1).compile_grammar(raw)
    outputs = _decode(
        service, smollm2_tokenizer, decoded_vocab, [SequenceGrammar(compiled) for _ in range(24)]
    )
    assert any(RAW_CONTROL.search(o.text) for o in outputs)


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ('"abcdef"', True),
        ('"été 日本"', True),  # lengths count code points
        ('"abcdefg"', False),  # 7 > maxLength
        ('"a\x01"', False),
        ('"a\tb"', False),
        ('"ab\\ncd"', False),  # no escapes in length-limited strings (as upstream intends)
    ],
)
def test_length_limited_string_characters(service, text, accepted):
    spec = parse_structured_output({"guided_json": {"type": "string", "maxLength": 6}})
    matcher = service.sequence_grammar(spec).matcher
    assert (matcher.accept_string(text) and matcher.is_completed()) is accepted


def test_user_grammars_are_left_as_written(service):
    spec = parse_structured_output({"guided_grammar": 'root ::= "<" [^"\\\\\\r\\n]{1,3} ">"'})
    matcher = service.sequence_grammar(spec).matcher
    assert matcher.accept_string("<a\x01>") and matcher.is_completed()
