"""The document groups' clauses written on the ``access_groups`` field: which clauses move to it, what the field
holds, and that a pattern matches its own token's value only (checked with Milvus Lite's own LIKE evaluation)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from agentsearch.pipeline.retrieval.access_field import ACCESS_FIELD, ACCESS_KEY, access_clause, access_value
from agentsearch.pipeline.retrieval.filters import MetadataFilter
from agentsearch.pipeline.security.document_access import access_filter, restricted

FIELDS = frozenset({ACCESS_FIELD})
HR, LEGAL = "team-1:hr", "team-1:legal_x"


def test_the_access_filter_is_written_on_the_field_when_the_collection_has_it():
    rule = access_filter([HR, LEGAL])
    on_field = rule.expression(FIELDS)
    assert "metadata[" not in on_field and ACCESS_FIELD in on_field
    assert not rule.scans(FIELDS)
    assert rule.scans() and f'metadata["{ACCESS_KEY}"]' in rule.expression()  # a collection made before it


def test_a_callers_own_clauses_stay_on_the_metadata_and_only_the_group_clauses_move():
    rule = MetadataFilter.model_validate(restricted({"eq": {"key": "region", "value": "emea"}}, [HR]))
    written = rule.expression(FIELDS)
    assert 'metadata["region"] == "emea"' in written
    assert f'metadata["{ACCESS_KEY}"]' not in written
    assert rule.scans(FIELDS)


def test_eq_ne_and_range_on_the_groups_key_keep_the_json_meaning():
    for raw in ({"eq": {"key": ACCESS_KEY, "value": HR}}, {"ne": {"key": ACCESS_KEY, "value": HR}},
                {"range": {"key": ACCESS_KEY, "gte": 1}}, {"in": {"key": ACCESS_KEY, "values": [1]}}):
        rule = MetadataFilter.model_validate(raw)
        assert rule.expression(FIELDS) == rule.expression(), raw
    assert access_clause("eq", [HR]) is None


def test_the_field_holds_one_sorted_digest_per_token_and_nothing_for_an_unrestricted_chunk():
    assert access_value(None) == "" and access_value([]) == "" and access_value("hr") == ""
    both = access_value([LEGAL, HR, HR])
    assert both == access_value([HR, LEGAL])
    digests = both.strip("|").split("|")
    assert len(digests) == 2 and all(len(d) == 32 and set(d) <= set("0123456789abcdef") for d in digests)
    assert HR not in both  # tokens are not written as they are


def test_each_pattern_matches_the_rows_holding_its_token_and_no_other():
    tokens = [HR, LEGAL, "team-1:legalXx", "team-2:hr", "team-1:h"]
    rows = pa.array([access_value([t]) for t in tokens] + [access_value([HR, LEGAL]), ""])
    for t in tokens:
        clause = access_clause("in", [t])
        assert clause is not None
        pattern = clause.split('"')[1]
        matched = pc.match_like(rows, pattern).to_pylist()
        expected = [t == other for other in tokens] + [t in (HR, LEGAL), False]
        assert matched == expected, t
