"""The users' metadata filters written on the indexed fields (``metadata_terms``, ``published_day``): which clauses
move there, that the day number orders as the stored string does, and that a filter on the fields keeps exactly the
rows its JSON form keeps, evaluated by Milvus Lite's own expression engine over a column table (the integration test
``tests/integration/test_metadata_index.py`` does the same through a real collection)."""

from __future__ import annotations

import json
import random
from datetime import date, timedelta

import pyarrow as pa
import pytest
from milvus_lite.schema.types import CollectionSchema, DataType, FieldSchema
from milvus_lite.search.filter import compile_filter, evaluate_mask

from agentsearch.pipeline.retrieval.access_field import ACCESS_FIELD
from agentsearch.pipeline.retrieval.filters import MetadataFilter, filter_problems
from agentsearch.pipeline.retrieval.metadata_index import (
    DAY_FIELD,
    INDEXED_FIELDS,
    NO_DAY,
    TERMS_FIELD,
    date_key,
    day_value,
    terms_value,
)

FIELDS = INDEXED_FIELDS | {ACCESS_FIELD}
SCHEMA = CollectionSchema(fields=[
    FieldSchema("id", DataType.VARCHAR, is_primary=True, max_length=16),
    FieldSchema("metadata", DataType.JSON),
    FieldSchema(TERMS_FIELD, DataType.VARCHAR, max_length=65535),
    FieldSchema(DAY_FIELD, DataType.INT64),
])
# Values of every JSON type, date strings of every shape a string comparison with YYYY-MM-DD cares about.
VALUES = [None, True, False, 0, 1, 2.5, "", "a", "b", "a_b", "%", "emea", "2024-01-01", "2024-01-01T05:00:00Z",
          "2023-12-31", "2024-01-02", "2024-1-5", "2024", "March 2024", "2024-01-01x", "20240101", "９９９９-01-01",
          ["a", "b"], ["emea"], [1, 2], ["2024-01-01"], {"x": "a"}]
KEYS = ("region", "tags", "published", "published_date", "date", "tier")


def _table(documents: list[dict]) -> pa.Table:
    return pa.table({"id": [str(i) for i in range(len(documents))],
                     "metadata": [json.dumps(d) for d in documents],
                     TERMS_FIELD: [terms_value(d) for d in documents],
                     DAY_FIELD: [day_value(d) for d in documents]})


def _kept(expression: str, table: pa.Table) -> tuple[set[int], str]:
    compiled = compile_filter(expression, SCHEMA)
    return {i for i, keep in enumerate(evaluate_mask(compiled, table)) if keep}, compiled.backend


STRINGS = ["", "a", "b", "a_b", "%", "emea", "2024-01-01"]
DAYS = ["2023-12-31", "2024-01-01", "2024-01-02", "0999-01-01", "9999-12-30"]
LEAVES = {
    "eq": lambda rng, key: {"key": key, "value": rng.choice(STRINGS)},
    "ne": lambda rng, key: {"key": key, "value": rng.choice(STRINGS)},
    "in": lambda rng, key: {"key": key, "values": rng.sample(STRINGS, rng.randint(1, 3))},
    "exists": lambda rng, key: {"key": key},
    "range": lambda rng, key: {"key": "published", rng.choice(["gt", "gte", "lt", "lte"]): rng.choice(DAYS),
                               **({"lt": rng.choice(DAYS)} if rng.random() < 0.3 else {})},
}


def _indexable(rng: random.Random, depth: int = 0) -> dict:
    """A filter of the clauses the fields answer: eq/ne/in on strings, exists, date ranges on published."""
    op = rng.choice([*LEAVES, "and", "or", "not"] if depth < 3 else list(LEAVES))
    if op == "not":
        return {op: _indexable(rng, depth + 1)}
    if op in ("and", "or"):
        return {op: [_indexable(rng, depth + 1) for _ in range(rng.randint(1, 3))]}
    return {op: LEAVES[op](rng, rng.choice([*KEYS, "absent"]))}


def test_the_users_common_clauses_are_written_on_the_fields_and_read_no_json():
    for raw in ({"eq": {"key": "region", "value": "emea"}},
                {"in": {"key": "tags", "values": ["solar", "wind"]}},
                {"ne": {"key": "region", "value": "emea"}},
                {"exists": {"key": "region"}},
                {"range": {"key": "published", "gte": "2024-01-01", "lte": "2024-12-31"}},
                {"not": {"and": [{"eq": {"key": "status", "value": "draft"}},
                                 {"range": {"key": "published", "lt": "2020-01-01"}}]}}):
        rule = MetadataFilter.model_validate(raw)
        assert not rule.scans(FIELDS), raw
        assert rule.scans(), raw  # a collection made before the fields reads the JSON, as it did
        assert rule.expression(frozenset()) == rule.expression()


@pytest.mark.parametrize("raw", [
    {"eq": {"key": "tier", "value": 2}},                       # numbers and booleans keep the JSON's comparisons
    {"in": {"key": "public", "values": [True]}},
    {"range": {"key": "tier", "gte": 1}},
    {"range": {"key": "date", "gte": "2024-01-01"}},           # a date range on a key other than published
    {"range": {"key": "published", "gte": 20240101}},          # a numeric range on published
])
def test_what_the_fields_cannot_say_scans(raw):
    assert MetadataFilter.model_validate(raw).scans(FIELDS)


def test_values_reach_the_expression_as_digests_only():
    hostile = 'x" or 1==1 or "'
    written = MetadataFilter.model_validate({"in": {"key": "region", "values": [hostile, "a%_"]}}).expression(FIELDS)
    assert hostile not in written and "a%_" not in written
    assert written.count(f"{TERMS_FIELD} like") == 4  # the value itself and as a list element, for each


def test_the_day_number_orders_as_the_stored_string_does_against_every_date_bound():
    rng = random.Random(5)
    alphabet = "0123456789-T:Z /.aM\u0660"
    strings = ["", "2024", "2024-", "2024-01-01", "2024-01-01T00:00:00Z", "2024-13-45", "0000-00-00", "9999-99-99z",
               "/", ":", "2024-01-0", "2024-01-0:", "2024/01/01", "March 2024"]
    strings += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14))) for _ in range(3000)]
    start = date(1990, 1, 1)
    bounds = [(start + timedelta(days=rng.randint(0, 20000))).isoformat() for _ in range(200)]
    bounds += ["0001-01-01", "2024-01-01", "9999-12-30"]
    for text in strings:
        for bound in rng.sample(bounds, 20) + bounds[-3:]:
            assert (text >= bound) == (date_key(text) >= date_key(bound)), (text, bound)
            assert (text < bound) == (date_key(text) < date_key(bound)), (text, bound)
    assert day_value({"published": 20240101}) == NO_DAY and day_value({}) == NO_DAY
    assert day_value({"published": None, "date": "2024-01-01"}) == date_key("2024-01-01")  # the first one set


def test_on_the_fields_a_filter_keeps_what_its_json_keeps_and_what_the_python_rule_keeps():
    rng = random.Random(20261129)
    documents = [{k: rng.choice(VALUES) for k in KEYS if rng.random() < 0.6} for _ in range(120)]
    table = _table(documents)
    drawn = (_indexable(rng) for _ in range(600))
    rules = [MetadataFilter.model_validate(raw) for raw in drawn if not filter_problems(raw)][:400]
    assert len(rules) == 400
    for rule in rules:
        on_fields, backend = _kept(rule.expression(FIELDS), table)
        on_json, _ = _kept(rule.expression(), table)
        assert backend == "arrow", rule.as_json()  # over whole columns, no row's JSON parsed
        kept = {i for i, d in enumerate(documents) if rule.matches(d)}
        assert on_fields == on_json == kept, rule.as_json()


def test_a_chunk_whose_metadata_passes_the_field_keeps_its_scalar_facts():
    metadata = {"region": "emea", "tags": [f"t{i}" for i in range(5000)]}
    value = terms_value(metadata)
    assert len(value) <= 65535
    table = _table([metadata])
    rule = MetadataFilter.model_validate({"eq": {"key": "region", "value": "emea"}})
    assert _kept(rule.expression(FIELDS), table)[0] == {0}
