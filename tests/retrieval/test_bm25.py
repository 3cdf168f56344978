"""BM25 in Postgres against independent references on the same tokens: rank_bm25.BM25Okapi for
the Okapi variant, the plain formula for Lucene's; kept exact through inserts, updates, deletes."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from rank_bm25 import BM25Okapi
from sqlalchemy import delete, text, update

from core.models import Chunk, Document
from core.settings.retrieval import BM25Config
from retrieval.bm25 import BM25Retriever, query_terms
from retrieval.corpus import CorpusDoc, add_documents
from retrieval.filters import SearchFilters

pytestmark = pytest.mark.integration

WORDS = [
    "river",
    "mountain",
    "quantum",
    "ledger",
    "violet",
    "engine",
    "harbor",
    "copper",
    "falcon",
    "glacier",
    "orbit",
    "saffron",
    "tundra",
    "velvet",
    "walnut",
    "zephyr",
    "canyon",
    "ember",
    "lantern",
    "meadow",
]


def random_docs(seed: int, n: int) -> list[CorpusDoc]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        words = rng.choices(WORDS, weights=range(len(WORDS), 0, -1), k=rng.randint(3, 25))
        if i % 2 == 0:
            words.append("common")  # in over half the chunks: negative Okapi idf, floored
        docs.append(CorpusDoc(f"doc-{seed}-{i}", " ".join(words)))
    docs.append(CorpusDoc(f"empty-{seed}", "the and of"))  # only stop words: length 0, still counts in N
    return docs


def corpus_tokens(session, collection_id) -> dict:
    """Each chunk's tokens as the index holds them (term repeated tf times)."""
    tokens = {
        cid: []
        for cid in session.scalars(
            text("SELECT id FROM chunks WHERE collection_id = :c"), {"c": collection_id}
        )
    }
    rows = session.execute(
        text("SELECT chunk_id, term, tf FROM bm25_postings WHERE collection_id = :c"), {"c": collection_id}
    )
    for cid, term, tf in rows:
        tokens[cid] += [term] * tf
    return tokens


def lucene_reference(tokens: dict, query: list[str], k1=0.9, b=0.4) -> dict:
    n = len(tokens)
    avgdl = sum(len(t) for t in tokens.values()) / n
    df = Counter(term for t in tokens.values() for term in set(t))
    scores = {}
    for cid, toks in tokens.items():
        tf = Counter(toks)
        s = sum(
            math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5))
            * tf[q]
            * (k1 + 1)
            / (tf[q] + k1 * (1 - b + b * len(toks) / avgdl))
            for q in query
            if tf[q]
        )
        if s:
            scores[cid] = s
    return scores


def okapi_reference(tokens: dict, query: list[str]) -> dict:
    ids = list(tokens)
    scores = BM25Okapi([tokens[i] for i in ids]).get_scores(query)
    return {cid: float(s) for cid, s in zip(ids, scores, strict=True) if s}


def ours(session, collection_id, query, variant) -> dict:
    hits = BM25Retriever(BM25Config(variant=variant)).run(session, collection_id, query, top_k=10_000)
    return {h.chunk_id: h.score for h in hits}


def assert_same(actual: dict, expected: dict) -> None:
    assert expected, "the reference scored nothing: the test would prove nothing"
    assert set(actual) == set(expected)
    for cid, score in expected.items():
        assert actual[cid] == pytest.approx(score, rel=1e-9, abs=1e-12)


QUERIES = ["quantum ledger", "common river river", "zephyr common", "glacier walnut ember meadow"]


def check_parity(session, collection_id) -> None:
    tokens = corpus_tokens(session, collection_id)
    for q in QUERIES:
        qt = query_terms(session, collection_id, q)
        assert_same(ours(session, collection_id, q, "lucene"), lucene_reference(tokens, qt))
        assert_same(ours(session, collection_id, q, "okapi"), okapi_reference(tokens, qt))


def test_parity_with_references_through_insert_update_delete(make_collection, session_factory, embedder):
    collection = make_collection(random_docs(1, 60))
    with session_factory() as session:
        assert query_terms(session, collection.id, "common river river") == ["common", "river", "river"]
        check_parity(session, collection.id)

        extra = random_docs(2, 15)
        add_documents(session, collection, extra, embedder.encode([d.text for d in extra]))
        session.execute(
            update(Chunk).where(Chunk.text.like("quantum%")).values(text="saffron quantum quantum")
        )
        session.execute(delete(Document).where(Document.source_id.in_(["doc-1-3", "doc-1-4", "doc-2-0"])))
        session.commit()
        check_parity(session, collection.id)
        stats = session.execute(
            text("SELECT n_chunks, total_len FROM bm25_stats WHERE collection_id = :c"), {"c": collection.id}
        ).one()
        tokens = corpus_tokens(session, collection.id)
        assert stats == (len(tokens), sum(len(t) for t in tokens.values()))


def test_okapi_floor_applies_to_terms_in_most_chunks(make_collection, session_factory):
    collection = make_collection(random_docs(3, 30))
    with session_factory() as session:
        scores = ours(session, collection.id, "common", "okapi")
        # every chunk holding "common" gets epsilon * mean idf > 0 (the raw idf is negative)
        assert len(scores) == 15 and all(s > 0 for s in scores.values())


def test_tokenizer_lowercases_unicode_and_stems_per_collection(make_collection, session_factory):
    docs = [CorpusDoc("fr", "Élégante ÉCOLE à Zürich"), CorpusDoc("en", "The runners were running quickly")]
    stemmed = make_collection(docs)
    plain = make_collection(docs, retrieval={"bm25": {"text_config": "simple"}})
    with session_factory() as session:
        assert sorted(query_terms(session, stemmed.id, "ÉCOLE Élégante ZÜRICH")) == [
            "zürich",
            "école",
            "élégant",
        ]
        assert query_terms(session, stemmed.id, "The RUNNING") == ["run"]
        assert sorted(query_terms(session, plain.id, "The RUNNING")) == ["running", "the"]
        assert list(ours(session, stemmed.id, "école runs", "lucene"))  # stems match across forms
        assert len(ours(session, plain.id, "école", "lucene")) == 1
        assert ours(session, plain.id, "runs", "lucene") == {}


def test_filters_narrow_results_but_not_statistics(make_collection, session_factory):
    collection = make_collection(random_docs(4, 40))
    with session_factory() as session:
        full = ours(session, collection.id, "quantum ledger", "lucene")
        keep = session.scalars(
            text("SELECT document_id FROM chunks WHERE id = ANY(:ids)"), {"ids": list(full)[:3]}
        ).all()
        hits = BM25Retriever().run(
            session, collection.id, "quantum ledger", 100, SearchFilters(document_ids=keep)
        )
        assert len(hits) == 3
        assert all(h.score == pytest.approx(full[h.chunk_id]) for h in hits)


def test_uncommitted_chunks_are_invisible_to_other_sessions(make_collection, session_factory, embedder):
    collection = make_collection(random_docs(5, 10))
    doc = [CorpusDoc("secret", "unobtainium unobtainium")]
    with session_factory() as writer, session_factory() as reader:
        add_documents(writer, collection, doc, embedder.encode([doc[0].text]))
        writer.flush()
        assert ours(writer, collection.id, "unobtainium", "lucene")
        assert ours(reader, collection.id, "unobtainium", "lucene") == {}
        writer.commit()
        reader.rollback()  # a new snapshot
        assert len(ours(reader, collection.id, "unobtainium", "lucene")) == 1
