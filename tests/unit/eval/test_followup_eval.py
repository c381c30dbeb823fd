"""The follow-up evaluation set: the sample set loads and names documents of the sample corpus, the SciFact rule
derives pairs from training claims only, and the agent's rewrites of the sample set cover the expected queries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsearch.pipeline.agents.builtin.query_contextualizer import contextualize
from agentsearch.pipeline.eval.followups import load_followups, scifact_followups

EXAMPLES = Path(__file__).resolve().parents[3] / "src" / "agentsearch" / "examples"


def test_the_sample_set_loads_and_every_relevant_document_is_in_the_sample_corpus():
    pairs = load_followups(EXAMPLES / "followups.jsonl")
    ids = {json.loads(line)["id"] for line in (EXAMPLES / "sample_corpus.jsonl").read_text().splitlines() if line}
    assert len(pairs) >= 10 and all(set(p.relevant) <= ids for p in pairs)


def test_the_rules_rewrite_most_sample_follow_ups_to_the_expected_query():
    pairs = load_followups(EXAMPLES / "followups.jsonl")
    exact = [p.id for p in pairs
             if contextualize(p.follow_up, [{"role": "user", "content": p.first}])[0] == p.standalone]
    assert {"q4-2024-revenue", "q3-2025-revenue", "q2-2024-revenue", "q1-2024-ebitda", "nordsee-turbines"} <= set(exact)


def test_scifact_follow_ups_follow_the_stated_rule_and_refuse_held_out_files(tmp_path):
    queries = tmp_path / "queries_train.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in [
        {"_id": "1", "text": "Aspirin use in older adults reduces the risk of colorectal cancer."},
        {"_id": "2", "text": "Too short a claim."},
        {"_id": "3", "text": "A claim judged against two documents is left out of the set."},
    ]))
    qrels = tmp_path / "train.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n2\td2\t1\n3\td3\t1\n3\td4\t1\n")
    [pair] = scifact_followups(queries, qrels)
    assert pair.first == "What is known about Aspirin use in older adults?"
    assert pair.follow_up == "What about its reduces the risk of colorectal cancer?"
    assert pair.standalone.startswith("Aspirin use") and pair.relevant == ["d1"]
    held_out = tmp_path / "queries_test.jsonl"
    held_out.write_text(queries.read_text())
    with pytest.raises(ValueError, match="training claims only"):
        scifact_followups(held_out, qrels)
