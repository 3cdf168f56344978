"""Per-sequence matchers and the batch mask, on the real SmolLM2 tokenizer."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from inference.grammar import EngineGrammars, GrammarService, StructuredOutputSpec, parse_structured_output
from inference.protocol import InvalidRequestError
from inference.sampling import apply_token_bitmask

pytestmark = pytest.mark.unit

YES_NO = parse_structured_output({"guided_choice": ["yes", "no"]})


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def test_batch_mask_constrains_only_grammar_rows(service, smollm2_tokenizer, decoded_vocab):
    grammar = service.sequence_grammar(YES_NO)
    logits = torch.randn(3, service.vocab_size, generator=torch.Generator().manual_seed(0))
    before = logits.clone()
    service.bitmask().apply(logits, [None, grammar, None])
    assert torch.equal(logits[0], before[0]) and torch.equal(logits[2], before[2])
    allowed = torch.isfinite(logits[1]).nonzero().flatten().tolist()
    assert allowed and all(decoded_vocab[t] in (b"y", b"ye", b"yes", b"n", b"no") for t in allowed)
    assert _ids(smollm2_tokenizer, "yes")[0] in allowed


def test_padded_vocab_ids_are_never_sampled(smollm2_tokenizer):
    padded = len(smollm2_tokenizer) + 64
    service = GrammarService(smollm2_tokenizer, vocab_size=padded)
    grammar = service.sequence_grammar(parse_structured_output({"response_format": {"type": "json_object"}}))
    logits = torch.zeros(2, padded)
    logits[:, len(smollm2_tokenizer) :] = 100.0  # the model "prefers" padding ids
    service.bitmask().apply(logits, [grammar, None])
    assert torch.isinf(logits[0, len(smollm2_tokenizer) :]).all()
    assert int(logits[0].argmax()) < len(smollm2_tokenizer)
    assert (logits[1, len(smollm2_tokenizer) :] == 100.0).all()


def test_logits_wider_than_the_service_vocab_are_masked(service):
    grammar = service.sequence_grammar(YES_NO)
    logits = torch.full((1, service.vocab_size + 10), 5.0)
    service.bitmask().apply(logits, [grammar])
    assert torch.isinf(logits[0, service.vocab_size :]).all()


def test_accept_rollback_and_is_allowed(service, smollm2_tokenizer):
    grammar = service.sequence_grammar(YES_NO)
    yes, no = _ids(smollm2_tokenizer, "yes")[0], _ids(smollm2_tokenizer, "no")[0]
    comma = _ids(smollm2_tokenizer, ",")[0]
    eos = smollm2_tokenizer.eos_token_id
    assert grammar.is_allowed(yes) and grammar.is_allowed(no)
    assert not grammar.is_allowed(comma) and not grammar.is_allowed(eos) and not grammar.is_allowed(-1)
    assert not grammar.accept(comma)  # rejected, state unchanged
    assert grammar.accept(yes)
    assert not grammar.is_allowed(no) and grammar.is_allowed(eos)
    grammar.rollback(1)  # e.g. the speculative token was rejected by the target model
    assert grammar.is_allowed(no)
    assert grammar.accept(no) and grammar.finish_reason() is None
    assert grammar.accept(eos) and grammar.is_terminated() and grammar.finish_reason() == "stop"
    assert not grammar.is_allowed(eos)


def test_terminated_rows_only_allow_stop_tokens(service, smollm2_tokenizer):
    grammar = service.sequence_grammar(YES_NO)
    for token in [*_ids(smollm2_tokenizer, "no"), smollm2_tokenizer.eos_token_id]:
        assert grammar.accept(token)
    logits = torch.zeros(1, service.vocab_size)
    service.bitmask().apply(logits, [grammar])
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [smollm2_tokenizer.eos_token_id]


def test_compiled_grammars_are_cached_lru(smollm2_tokenizer):
    service = GrammarService(smollm2_tokenizer, cache_size=2)
    a, b, c = (parse_structured_output({"guided_regex": r}) for r in ("a+", "b+", "c+"))
    first_a = service.compile(a)
    assert service.compile(parse_structured_output({"guided_regex": "a+"})) is first_a
    first_b = service.compile(b)
    service.compile(a)  # refreshes a, so b is now the least recently used
    service.compile(c)
    assert service.compile(a) is first_a
    assert service.compile(b) is not first_b


def test_stop_token_ids_can_be_overridden(smollm2_tokenizer):
    endoftext = smollm2_tokenizer.convert_tokens_to_ids("<|endoftext|>")
    service = GrammarService(smollm2_tokenizer, stop_token_ids=[endoftext])
    grammar = service.sequence_grammar(YES_NO)
    assert grammar.accept(_ids(smollm2_tokenizer, "yes")[0])
    assert grammar.is_allowed(endoftext) and not grammar.is_allowed(smollm2_tokenizer.eos_token_id)


def test_unvalidated_specs_still_fail_as_invalid_requests(service):
    with pytest.raises(InvalidRequestError, match="parenthesis is not closed"):
        service.compile(StructuredOutputSpec("regex", regex="("))


def test_engine_grammars_bitmask_fits_the_samplers_hook(service, smollm2_tokenizer):
    grammars = EngineGrammars(service)
    seqs = [SimpleNamespace(request_id=r) for r in ("free", "json", "yes-no")]
    assert grammars.bitmask(seqs) is None  # nothing constrained: the sampler skips masking
    grammars.add("free", None)
    grammars.add("json", parse_structured_output({"response_format": {"type": "json_object"}}))
    grammars.add("yes-no", YES_NO)
    bitmask = grammars.bitmask(seqs)
    logits = torch.randn(3, service.vocab_size, generator=torch.Generator().manual_seed(1))
    expected = logits.clone()
    apply_token_bitmask(logits, bitmask)  # the engine's sampler hook
    service.bitmask().apply(expected, [None, grammars.get("json"), grammars.get("yes-no")])
    assert torch.equal(logits, expected)

    yes = _ids(smollm2_tokenizer, "yes")
    assert [grammars.accept("yes-no", t) for t in yes] == [False] * len(yes)
    assert grammars.accept("yes-no", smollm2_tokenizer.eos_token_id) is True  # finished: "stop"
    assert grammars.accept("free", 123) is False
    with pytest.raises(RuntimeError, match="violates its grammar"):
        grammars.accept("json", _ids(smollm2_tokenizer, "]")[0])
    grammars.remove("yes-no")
    assert grammars.get("yes-no") is None
