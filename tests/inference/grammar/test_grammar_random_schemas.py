"""200 random JSON schemas decoded as one batch by a random model over SmolLM2's vocabulary."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

from inference.grammar import parse_structured_output
from tests.inference.grammar.random_model import generate
from tests.inference.grammar.random_schemas import random_schema

MAX_TOKENS = 160


@pytest.mark.slow
def test_every_finished_output_validates_against_its_schema(service, smollm2_tokenizer):
    rng = random.Random(2024)
    schemas = [random_schema(rng) for _ in range(200)]
    specs = [
        parse_structured_output(
            {"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": s}}}
        )
        for s in schemas
    ]
    grammars = [service.sequence_grammar(spec) for spec in specs]
    outputs = generate(service, grammars, smollm2_tokenizer, max_tokens=MAX_TOKENS, seed=1)

    finished = [(s, o) for s, o in zip(schemas, outputs, strict=True) if o.finish_reason == "stop"]
    cut = [o for o in outputs if o.finish_reason == "length"]
    print(f"\n{len(finished)} finished, {len(cut)} cut at {MAX_TOKENS} tokens")
    assert len(finished) >= 150, "too few outputs finished for the check to mean much"
    for schema, output in finished:
        jsonschema.validate(json.loads(output.text), schema, cls=jsonschema.Draft202012Validator)
    for output in cut:  # 'length' is only ever reported for outputs the grammar did not finish
        assert len(output.token_ids) == MAX_TOKENS
    assert all(
        g.is_terminated() == (o.finish_reason == "stop") for g, o in zip(grammars, outputs, strict=True)
    )
