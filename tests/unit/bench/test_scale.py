"""The scale benchmark's rows: derived vectors stay unit vectors near the sample, a fifth of the rows is restricted,
the keyword side gets real analysed text, and the table shows every figure the JSON holds."""

from __future__ import annotations

import numpy as np

from agentsearch.bench.scale import Corpus, table
from agentsearch.pipeline.retrieval.access_field import ACCESS_KEY


def _corpus() -> Corpus:
    rng = np.random.default_rng(0)
    sample = rng.normal(size=(50, 16)).astype(np.float32)
    sample /= np.linalg.norm(sample, axis=1, keepdims=True)
    texts = [f"Sample abstract {i} about insulin signalling." for i in range(50)]
    sentences = ["Mitochondria regulate apoptosis in neurons.", "T cells respond to antigens in the thymus."]
    return Corpus(sample, texts, sentences)


def test_derived_vectors_are_unit_vectors_closer_to_the_sample_than_chance():
    corpus = _corpus()
    vectors = corpus.vectors(0, 500)
    assert np.allclose(vectors[:50], corpus.sample)  # the sample rows keep the model's own vectors
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    nearest = (vectors[50:] @ corpus.sample.T).max(axis=1)
    assert nearest.mean() > 0.6  # a mix of two sample vectors: near them, unlike a random 16-d direction


def test_a_fifth_of_the_rows_is_restricted_and_every_row_has_analysed_text():
    corpus = _corpus()
    chunks = corpus.chunks(0, corpus.vectors(0, 200))
    restricted = [c for c in chunks if ACCESS_KEY in c.metadata]
    assert len(restricted) == 40
    assert len({tuple(c.metadata[ACCESS_KEY]) for c in restricted}) == 4
    assert chunks[0].text.startswith("Sample abstract 0") and chunks[120].text.split(".")[0] in (
        "Mitochondria regulate apoptosis in neurons", "T cells respond to antigens in the thymus")
    assert all(c.keywords.strip() for c in chunks)


def test_the_table_has_a_row_per_size_with_the_filters_and_groups_ratios():
    case = {"p50": 10.0, "p95": 20.0}
    cases = ("dense_ms", "keyword_ms", "hybrid_ms", "hybrid_filter_ms", "hybrid_range_ms", "hybrid_filter_json_ms",
             "hybrid_groups_ms", "hybrid_groups_json_ms")
    row = {"chunks": 10_000, **dict.fromkeys(cases, case),
           "groups_ratio": 1.05, "groups_json_ratio": 19.9, "filter_ratio": 1.2, "range_ratio": 1.1,
           "filter_json_ratio": 30.5, "recall_at_10": 0.99, "insert_chunks_per_s": 1200.0,
           "cold_load_s": 2.5, "milvus_rss_mb": 512.0, "disk_mb": 40.0}
    skipped = {"p50": None, "p95": None, "n": 0, "skipped": "not run past 50,000 chunks"}
    large = {**row, "chunks": 100_000, "hybrid_filter_json_ms": skipped, "filter_json_ratio": None}
    lines = table({"sizes": [row, large]}).splitlines()
    assert len(lines) == 4 and "| 10,000 |" in lines[2] and "| 100,000 |" in lines[3]
    assert "1.05x (JSON 19.9x)" in lines[2]
    assert "eq 1.2x, range 1.1x (JSON 30.5x)" in lines[2]
    assert "| not run |" in lines[3] and "(JSON -)" in lines[3]
