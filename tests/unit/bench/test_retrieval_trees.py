"""The side-by-side retrieval run's sides and its table: what a command line names is what runs and is shown."""

from __future__ import annotations

import pytest

from agentsearch.bench.retrieval_trees import parse_side, table


def test_a_side_names_its_tree_and_the_settings_it_changes():
    assert parse_side("now") == ("now", {})
    assert parse_side("base") == ("base", {})
    assert parse_side("now:embedding_query_runtime=same,search_fusion=rrf") == (
        "now", {"embedding_query_runtime": "same", "search_fusion": "rrf"})


@pytest.mark.parametrize("spec", ["then", "now:embedding_query_runtime", "main:a=b"])
def test_a_side_that_is_not_one_is_refused_naming_it(spec):
    with pytest.raises(ValueError, match="side"):
        parse_side(spec)


def test_the_table_has_a_row_per_side_and_says_the_load():
    result = {"figures": {"base": {"ndcg@10": 0.7320, "recall@100": 0.954, "mrr@10": 0.7, "p50_ms": 259.0,
                                   "p95_ms": 400.0, "embedding_p50_ms": 12.0},
                          "now": {"ndcg@10": 0.7301, "recall@100": 0.958, "mrr@10": 0.7, "p50_ms": 150.5,
                                  "p95_ms": 300.0, "embedding_p50_ms": 6.25}},
              "queries": 809, "chunks": 10465, "index_reused": True, "load_start": [1.1, 1.2, 1.3],
              "load_end": [1.0, 1.2, 1.3]}
    lines = table(result)
    assert lines[2] == "| base | 0.7320 | 0.9540 | 0.7000 | 259.0 | 400.0 | 12.0 |"
    assert lines[3] == "| now | 0.7301 | 0.9580 | 0.7000 | 150.5 | 300.0 | 6.2 |"
    assert "809 queries, 10465 chunks (index reused)" in lines[-1] and "1.1, 1.2, 1.3 at the start" in lines[-1]
