"""Metadata filters (agentsearch.pipeline.retrieval.filters): the language's checks and error paths, its compilation to
a Milvus expression (template + parameters, and the literals written in), the same rules in Python, and where a filter
reaches: the search config's cache view, the retriever's two Milvus searches, the agents' toolbox and cache keys,
and the API's 422s (nothing written).

Expressions are parsed with Milvus Lite's own tokenizer and parser (the engine the service runs against), so a
value that broke out of its literal would show as extra tokens or extra comparisons.
"""

from __future__ import annotations

import math
from datetime import date
from types import SimpleNamespace
from typing import ClassVar

import pytest
from milvus_lite.search.filter.parser import parse_expr
from milvus_lite.search.filter.tokens import TokenKind, tokenize
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentContext, Stage
from agentsearch.pipeline.job.agent_call import agent_context
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.config import SearchConfig
from agentsearch.pipeline.retrieval.filters import (
    MAX_DEPTH,
    MAX_IN_VALUES,
    MAX_NODES,
    MetadataFilter,
    filter_problems,
    parse_filter,
)
from agentsearch.pipeline.retrieval.milvus_expressions import milvus_literal
from agentsearch.pipeline.retrieval.retriever import Retriever
from agentsearch.pipeline.retrieval.stored_chunks import Hit
from tests.support.api_checks import jobs_written, locs, new_collection
from tests.support.dict_cache import DictCache

INJECTIONS = ['x" or 1==1 or "', "'x' || true", 'a\\" or true or \\"', "\\", '"', "'", "new\nline", "cr\rlf",
              "tab\tend", "{p0}", "%s", "é 中文 😀", 'metadata["k"] == "v"', ")) or ((true", "\\\\\"", ""]


def build(raw) -> MetadataFilter:
    return MetadataFilter.model_validate(raw)


def eq(key, value):
    return {"eq": {"key": key, "value": value}}


# --- compilation: each operator -------------------------------------------------------------------------------


def test_eq_and_ne_compile_to_a_comparison_with_the_value_as_a_parameter():
    compiled = build(eq("region", "emea")).compile()
    assert compiled.template == 'metadata["region"] == {p0}'
    assert compiled.params == {"p0": "emea"}
    assert compiled.expression() == 'metadata["region"] == "emea"'
    ne = build({"ne": {"key": "tier", "value": 3}}).compile()
    assert (ne.template, ne.params, ne.expression()) == ('metadata["tier"] != {p0}', {"p0": 3}, 'metadata["tier"] != 3')
    assert build(eq("ok", True)).expression() == 'metadata["ok"] == true'
    assert build(eq("score", 0.25)).expression() == 'metadata["score"] == 0.25'


def test_in_is_a_chain_of_equalities_or_a_list_sharing_a_value():
    compiled = build({"in": {"key": "tags", "values": ["solar", "wind"]}}).compile()
    assert compiled.template == ('(metadata["tags"] == {p0} or metadata["tags"] == {p1} '
                                 'or json_contains_any(metadata["tags"], {p2}))')
    assert compiled.params == {"p0": "solar", "p1": "wind", "p2": ["solar", "wind"]}
    assert compiled.expression().endswith('json_contains_any(metadata["tags"], ["solar", "wind"]))')


def test_a_numeric_range_compiles_bound_by_bound():
    compiled = build({"range": {"key": "pages", "gt": 2, "lte": 10.5}}).compile()
    assert compiled.template == '(metadata["pages"] > {p0} and metadata["pages"] <= {p1})'
    assert compiled.params == {"p0": 2, "p1": 10.5}


def test_a_date_range_compares_by_day_so_timestamps_of_that_day_count():
    compiled = build({"range": {"key": "issued", "gt": "2024-02-28", "lte": "2024-12-31"}}).compile()
    # After the 28th is from the 29th (a leap year); up to the 31st is before the next day.
    assert compiled.template == '(metadata["issued"] >= {p0} and metadata["issued"] < {p1})'
    assert compiled.params == {"p0": "2024-02-29", "p1": "2025-01-01"}
    spec = build({"range": {"key": "issued", "gte": "2024-03-01", "lte": "2024-03-01"}})
    assert spec.matches({"issued": "2024-03-01T23:59:59Z"}) and spec.matches({"issued": "2024-03-01"})
    assert not spec.matches({"issued": "2024-02-29T23:59:59Z"}) and not spec.matches({"issued": "2024-03-02"})


def test_exists_and_the_boolean_operators():
    spec = build({"and": [{"exists": {"key": "region"}},
                          {"or": [eq("a", 1), {"not": eq("b", "x")}]}]})
    compiled = spec.compile()
    assert compiled.template == ('(exists metadata["region"] and (metadata["a"] == {p0} or '
                                 'not metadata["b"] == {p1}))')
    assert compiled.params == {"p0": 1, "p1": "x"}


def test_published_means_the_first_date_key_a_document_has():
    compiled = build({"range": {"key": "published", "gte": "2024-01-01"}}).compile()
    assert compiled.template == (
        '((exists metadata["published"] and (metadata["published"] >= {p0})) or '
        '(not exists metadata["published"] and exists metadata["published_date"] and '
        '(metadata["published_date"] >= {p0})) or '
        '(not exists metadata["published"] and not exists metadata["published_date"] and '
        '(metadata["date"] >= {p0})))')
    spec = build({"range": {"key": "published", "gte": "2024-01-01"}})
    assert spec.matches({"published_date": "2024-06-01"})
    assert not spec.matches({"published": "2023-01-01", "date": "2024-06-01"})  # published wins, as in scoring
    assert build({"exists": {"key": "published"}}).expression() == (
        '(exists metadata["published"] or exists metadata["published_date"] or exists metadata["date"])')


@pytest.mark.parametrize("raw", [
    eq("region", "emea"),
    {"ne": {"key": "n", "value": -2.5}},
    {"in": {"key": "tags", "values": ["a", "b", "c"]}},
    {"range": {"key": "published", "gt": "2020-01-01", "lt": "2021-01-01"}},
    {"and": [{"or": [eq("a", True), {"exists": {"key": "b"}}]}, {"not": {"range": {"key": "n", "gte": 1e20}}}]},
])
def test_every_compiled_expression_parses_in_milvus_lite(raw):
    assert parse_expr(build(raw).expression()) is not None


# --- values are matched literally -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", INJECTIONS)
def test_a_string_literal_tokenises_back_to_exactly_the_value(value):
    tokens = [t for t in tokenize(milvus_literal(value)) if t.kind != TokenKind.EOF]
    assert len(tokens) == 1 and tokens[0].kind == TokenKind.STRING
    assert tokens[0].value == value


@pytest.mark.parametrize("value", INJECTIONS)
def test_an_injection_attempt_stays_one_comparison(value):
    expression = build({"and": [eq("region", value), eq("tier", 1)]}).expression()
    tokens = [t for t in tokenize(expression) if t.kind != TokenKind.EOF]
    assert [t.kind for t in tokens].count(TokenKind.OR) == 0  # no `or` got in from the value
    assert [t.kind for t in tokens].count(TokenKind.EQ) == 2
    assert [t.value for t in tokens if t.kind == TokenKind.STRING] == ["region", value, "tier"]  # keys, the value


def test_literals_of_other_types():
    assert milvus_literal(True) == "true" and milvus_literal(False) == "false"
    assert milvus_literal(-7) == "-7" and milvus_literal(1e20) == "1e+20"
    assert milvus_literal(["a", 1]) == '["a", 1]'
    with pytest.raises(ValueError):
        milvus_literal(math.nan)
    with pytest.raises(TypeError):
        milvus_literal({"a": 1})


# --- keys -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ['re"gion', "a b", "a]", "", "1st", "k" * 65, 'x"] or true or metadata["y',
                                 "a.b", "ключ", "a\\", "a\n"])
def test_a_key_outside_the_pattern_is_refused_at_its_path(key):
    assert filter_problems({"not": eq(key, "v")}) == [
        (("not", "eq", "key"), "a key is 1-64 letters, digits, '_' or '-', starting with a letter or '_'",
         "value_error")]


def test_keys_inside_the_pattern():
    for key in ("region", "_private", "company-id", "a1", "k" * 64):
        assert build(eq(key, 1)).expression() == f'metadata["{key}"] == 1'


def test_a_key_is_never_escaped_into_an_expression_even_when_built_around_validation():
    spec = MetadataFilter.model_construct(eq=MetadataFilter.model_fields["eq"].annotation.__args__[0]
                                          .model_construct(key='a"] or true or metadata["b', value=1))
    with pytest.raises(ValueError):
        spec.expression()


# --- bounds and error paths -------------------------------------------------------------------------------------


def nested(depth: int) -> dict:
    node = eq("a", 1)
    for _ in range(depth - 1):
        node = {"not": node}
    return node


def test_nesting_is_bounded_and_the_error_names_the_node_too_deep():
    assert filter_problems(nested(MAX_DEPTH)) == []
    problems = filter_problems({"and": [eq("a", 1), nested(MAX_DEPTH)]})
    assert problems == [(("and", 1, *["not"] * (MAX_DEPTH - 1)), f"a filter may nest at most {MAX_DEPTH} levels deep",
                         "value_error")]
    with pytest.raises(ValidationError):
        build(nested(MAX_DEPTH + 1))


def test_the_number_of_operators_is_bounded():
    assert filter_problems({"or": [eq("a", i) for i in range(MAX_NODES - 1)]}) == []
    assert filter_problems({"or": [eq("a", i) for i in range(MAX_NODES)]})[0][:2] == (
        (), f"a filter may hold at most {MAX_NODES} operators")
    assert filter_problems({"or": [eq("a", i) for i in range(10_000)]})[0][0] == ("or",)


def test_in_lists_are_bounded():
    assert filter_problems({"in": {"key": "a", "values": []}})[0][:1] == (("in", "values"),)
    assert filter_problems({"in": {"key": "a", "values": list(range(MAX_IN_VALUES + 1))}})[0][0] == ("in", "values")
    assert filter_problems({"in": {"key": "a", "values": list(range(MAX_IN_VALUES))}}) == []
    assert filter_problems({"in": {"key": "a", "values": ["x", {"y": 1}]}})[0][:2] == (
        ("in", "values", 1), "a value is a string, a number or a boolean")


@pytest.mark.parametrize("raw, loc, words", [
    ({"and": [eq("a", 1), {"range": {"key": "n", "gt": "soon"}}]}, ("and", 1, "range", "gt"), "number or a date"),
    ({"and": [eq("a", 1), {"range": {"key": "n", "gt": 5, "lt": "2024-01-01"}}]}, ("and", 1, "range", "lt"),
     "numbers or dates, not both"),
    ({"range": {"key": "n", "gte": "2024-01-01", "lte": 7}}, ("range", "lte"), "numbers or dates, not both"),
    ({"range": {"key": "n"}}, ("range",), "at least one of gt, gte, lt, lte"),
    ({"range": {"key": "n", "gt": 1, "gte": 2}}, ("range", "gte"), "gt or gte"),
    ({"range": {"key": "n", "gt": True}}, ("range", "gt"), "number or a date"),
    ({"range": {"key": "n", "lt": "2024-02-30"}}, ("range", "lt"), "not a calendar date"),
    ({"or": [eq("a", 1), {"regex": {"key": "a"}}]}, ("or", 1, "regex"), "unknown operator 'regex'"),
    ({"eq": {"key": "a", "value": 1, "mode": "i"}}, ("eq", "mode"), "unknown field 'mode'"),
    ({}, (), "exactly one operator"),
    ({"eq": {"key": "a", "value": 1}, "ne": {"key": "a", "value": 2}}, (), "this one holds eq, ne"),
    ({"and": []}, ("and",), "at least 1 item"),
    ({"eq": {"key": "a", "value": None}}, ("eq", "value"), "string, a number or a boolean"),
    ({"eq": {"key": "a", "value": [1]}}, ("eq", "value"), "string, a number or a boolean"),
    ({"eq": {"key": "a", "value": 2**60}}, ("eq", "value"), "within"),
    ({"eq": {"key": "a", "value": "x" * 1001}}, ("eq", "value"), "at most 1000"),
    ({"eq": {"key": "a", "value": "nul\x00"}}, ("eq", "value"), "NUL"),
    ({"not": [eq("a", 1)]}, ("not",), "valid dictionary"),
    ("region = emea", (), "valid dictionary"),
])
def test_malformed_filters_name_the_path_at_fault(raw, loc, words):
    problems = filter_problems(raw)
    assert problems, raw
    assert problems[0][0] == loc
    assert words in problems[0][1]


def test_non_finite_numbers_are_refused_when_built_directly():
    for value in (math.nan, math.inf):
        assert filter_problems(eq("a", value))[0][0] == ("eq", "value")
        assert filter_problems({"range": {"key": "a", "lt": value}})[0][0] == ("range", "lt")


def test_parse_filter_says_where():
    assert parse_filter(None) is None
    with pytest.raises(ValueError, match=r"filter\['and'\]\[0\]\['range'\]: a range needs"):
        parse_filter({"and": [{"range": {"key": "n"}}]})
    spec = parse_filter({"range": {"key": "d", "gte": "2024-01-01"}})
    assert spec.range.gte == date(2024, 1, 1)
    assert parse_filter(spec) is spec


def test_the_json_form_is_normalised_and_builds_the_same_filter_again():
    spec = build({"and": [{"in": {"key": "t", "values": ["a"]}}, {"not": {"range": {"key": "d", "gt": "2024-01-01"}}}]})
    assert spec.as_json() == {"and": [{"in": {"key": "t", "values": ["a"]}},
                                      {"not": {"range": {"key": "d", "gt": "2024-01-01"}}}]}
    assert build(spec.as_json()) == spec


# --- the same rules in Python -----------------------------------------------------------------------------------


def test_a_clause_on_a_missing_key_is_unknown_and_not_keeps_it_unknown():
    assert not build(eq("region", "emea")).matches({})
    assert not build({"not": eq("region", "emea")}).matches({})
    assert build({"not": eq("region", "emea")}).matches({"region": "apac"})
    assert not build({"ne": {"key": "region", "value": "emea"}}).matches({})
    # "or" with a true side is true whatever the other side is; "and" with a false side is false.
    assert build({"or": [eq("region", "emea"), eq("missing", 1)]}).matches({"region": "emea"})
    assert build({"not": {"and": [eq("region", "emea"), eq("missing", 1)]}}).matches({"region": "apac"})
    assert not build({"not": {"and": [eq("region", "emea"), eq("missing", 1)]}}).matches({"region": "emea"})
    # The way to include documents without the key.
    either = build({"or": [{"not": {"exists": {"key": "region"}}}, {"ne": {"key": "region", "value": "emea"}}]})
    assert either.matches({}) and either.matches({"region": "apac"}) and not either.matches({"region": "emea"})


def test_in_over_scalars_and_lists_and_ranges_over_mismatched_types():
    spec = build({"in": {"key": "tags", "values": ["solar", "wind"]}})
    assert spec.matches({"tags": "wind"}) and spec.matches({"tags": ["coal", "solar"]})
    assert not spec.matches({"tags": ["coal"]}) and not spec.matches({"tags": "coal"})
    numbers = build({"range": {"key": "n", "gte": 2}})
    assert numbers.matches({"n": 2}) and not numbers.matches({"n": "5"}) and not numbers.matches({"n": [3]})
    assert not build({"not": {"range": {"key": "n", "gte": 2}}}).matches({"n": "5"})


# --- where a filter reaches -------------------------------------------------------------------------------------


def test_the_search_config_carries_the_filter_into_its_cache_view():
    plain = SearchConfig()
    assert "filter" not in plain.cache_view()  # keys of searches without a filter are what they were
    filtered = SearchConfig(filter=eq("region", "emea"))
    assert filtered.cache_view()["filter"] == eq("region", "emea")
    assert SearchConfig(filter=eq("region", "apac")).cache_view() != filtered.cache_view()
    with pytest.raises(ValidationError) as err:
        SearchConfig(filter={"range": {"key": "n"}})
    assert err.value.errors()[0]["loc"] == ("filter", "range")


def _written(filter_expr):
    """The filter as a store without promoted fields hands it to Milvus (the retriever passes the filter itself)."""
    return filter_expr.expression() if isinstance(filter_expr, MetadataFilter) else filter_expr


class RecordingStore:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def dense_search(self, name, vector, limit, filter_expr=None):
        self.calls.append(("dense", _written(filter_expr)))
        return [Hit(id="d1#0", document_id="d1", title="t", text="solar output", score=0.9, metadata={"r": "emea"})]

    def keyword_search(self, name, analyzed, limit, filter_expr=None):
        self.calls.append(("keyword", _written(filter_expr)))
        return [Hit(id="d1#0", document_id="d1", title="t", text="solar output", score=3.0, metadata={"r": "emea"})]

    def vectors(self, name, ids):
        return {}

    def sentence_vectors(self, name, chunk_ids):
        return {}


@pytest.mark.parametrize("strategy, expected", [("semantic", {"dense"}), ("keyword", {"keyword"}),
                                                ("hybrid", {"dense", "keyword"}), ("adaptive", {"dense", "keyword"})])
def test_every_strategy_hands_the_filter_to_each_milvus_search(strategy, expected):
    store = RecordingStore()
    retriever = Retriever(embed=lambda texts: [[1.0, 0.0] for _ in texts], store=store, analyzer=KeywordAnalyzer())
    config = SearchConfig(strategy=strategy, top_k=1, filter=eq("r", "emea"), near_duplicate_threshold=None)
    result = retriever.search("c1", "solar output", config)
    assert result.metrics["filter"] == eq("r", "emea")  # said in the job's search metadata
    assert {kind for kind, _ in store.calls} == expected
    assert {expr for _, expr in store.calls} == {'metadata["r"] == "emea"'}


def test_without_a_filter_the_store_is_called_as_before():
    store = RecordingStore()
    Retriever(embed=lambda texts: [[1.0, 0.0] for _ in texts], store=store,
              analyzer=KeywordAnalyzer()).search("c1", "solar output", SearchConfig(near_duplicate_threshold=None))
    assert {expr for _, expr in store.calls} == {None}


def test_the_retrieval_cache_keeps_filtered_and_unfiltered_searches_apart():
    store, cache = RecordingStore(), DictCache()
    retriever = Retriever(embed=lambda texts: [[1.0, 0.0] for _ in texts], store=store, analyzer=KeywordAnalyzer(),
                          cache=cache)
    base = SearchConfig(strategy="keyword", near_duplicate_threshold=None)
    retriever.search("c1", "solar", base)
    retriever.search("c1", "solar", base.model_copy(update={"filter": build(eq("r", "emea"))}))
    retriever.search("c1", "solar", base.model_copy(update={"filter": build(eq("r", "apac"))}))
    assert len(store.calls) == 3 and len([k for k in cache.stored if k.startswith("search:")]) == 3
    retriever.search("c1", "solar", base.model_copy(update={"filter": build(eq("r", "apac"))}))
    assert len(store.calls) == 3  # the same filter again: answered from the cache


def test_agents_of_a_filtered_job_get_the_filter_in_their_context_and_cache_key(make_runner):
    state = JobState(job_id="j", collection_id="c", user_id="u", query="q", original_query="q", top_k=3,
                     search={"filter": eq("region", "emea")})
    ctx = agent_context(state, Stage.PRE_SEARCH)
    assert ctx.search_filter == eq("region", "emea")
    runner = make_runner()
    from agentsearch.pipeline.agents.base import Agent, PreSearchInput

    class Probe(Agent):
        agent_id = "probe"
        stage = Stage.PRE_SEARCH

    agent, inp = Probe(), PreSearchInput(query="q")
    plain = AgentContext(pipeline_stage=Stage.PRE_SEARCH, collection_id="c")
    keys = {runner._cache_key(agent, "h", inp, c) for c in (
        plain, ctx.model_copy(update={"search_filter": eq("region", "emea")}),
        ctx.model_copy(update={"search_filter": eq("region", "apac")}))}
    assert len(keys) == 3


def test_the_toolbox_search_of_a_filtered_job_applies_the_filter():
    from agentsearch.pipeline.agents.toolbox import AgentTools

    seen = []

    class Services:
        db = None  # the toolbox reads no collection row here: its ownership check is stubbed below

        class Settings:
            search_fusion = "weighted"
            embedding_model = "m"

        settings = Settings

        class Retriever:
            @staticmethod
            def search(name, query, config, epoch=0, model=""):
                seen.append(config.filter)

                class Result:
                    documents: ClassVar[list] = []
                return Result()

        retriever = Retriever

    tools = AgentTools(Services(), user_id="6b0f9a52-1d4e-4c8a-9a55-0e1c2f3d4b5a").with_filter(eq("region", "emea"))
    # Ownership is another test's concern: a personal collection of the user's, so no document groups either.
    tools.owned_collection = lambda collection_id: SimpleNamespace(id=collection_id, team_id=None, index_epoch=0)
    tools.search("0b6f9a52-1d4e-4c8a-9a55-0e1c2f3d4b5a", "solar", top_k=3, strategy="keyword")
    assert seen == [build(eq("region", "emea"))]


# --- the API ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("filter_, loc", [
    ({"and": [eq("a", 1), {"range": {"key": "n", "gt": "soon"}}]}, ["body", "filter", "and", 1, "range", "gt"]),
    ({"range": {"key": "n", "gt": 1, "lt": "2024-01-01"}}, ["body", "filter", "range", "lt"]),
    ({"range": {"key": "n"}}, ["body", "filter", "range"]),
    ({"in": {"key": "n", "values": []}}, ["body", "filter", "in", "values"]),
    ({"in": {"key": "n", "values": list(range(101))}}, ["body", "filter", "in", "values"]),
    ({"xor": [eq("a", 1)]}, ["body", "filter", "xor"]),
    (eq('a"]', 1), ["body", "filter", "eq", "key"]),
    (nested(MAX_DEPTH + 1), ["body", "filter", *["not"] * MAX_DEPTH]),
    ("region=emea", ["body", "filter"]),
])
def test_a_malformed_filter_is_422_naming_the_path_and_writes_nothing(client, app, filter_, loc):
    collection_id = new_collection(client, "filtered")
    before = jobs_written(app)
    response = client.post("/v1/search", json={"collection_id": collection_id, "query": "solar", "filter": filter_})
    assert response.status_code == 422, response.text
    assert locs(response)[0] == loc
    assert jobs_written(app) == before


def test_a_filter_inside_search_overrides_is_refused(client, app):
    collection_id = new_collection(client, "filtered")
    response = client.post("/v1/search", json={"collection_id": collection_id, "query": "solar",
                                               "search": {"filter": eq("a", 1)}})
    assert response.status_code == 422
    assert locs(response) == [["body", "search", "filter"]]


# --- the CLI ----------------------------------------------------------------------------------------------------


def test_agentsearch_search_sends_the_filter_and_refuses_what_is_not_json(monkeypatch):
    import contextlib

    from click.testing import CliRunner

    from agentsearch.cli import main, search as search_module

    sent = {}

    class Client:
        def find_collection(self, name):
            return {"id": "c1"}

        def submit(self, collection_id, query, **options):
            sent.update(options)
            return "j1"

        def wait_job(self, job_id):
            return {"job_id": job_id, "status": "succeeded", "response": None}

    monkeypatch.setattr(search_module, "api_session", lambda settings: contextlib.nullcontext(Client()))
    raw = '{"and": [{"eq": {"key": "region", "value": "emea"}}, {"range": {"key": "published", "gte": "2024-01-01"}}]}'
    result = CliRunner().invoke(main, ["search", "solar", "--collection", "reports", "--filter", raw])
    assert result.exit_code == 0, result.output
    assert sent["filter"] == {"and": [eq("region", "emea"), {"range": {"key": "published", "gte": "2024-01-01"}}]}
    refused = CliRunner().invoke(main, ["search", "solar", "--collection", "reports", "--filter", "{region: emea"])
    assert refused.exit_code != 0 and "--filter is not JSON" in refused.output


def test_agentsearch_eval_retrieval_refuses_a_malformed_filter_before_loading_anything(tmp_path):
    from click.testing import CliRunner

    from agentsearch.cli import main

    corpus, queries, qrels = tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl", tmp_path / "qrels.tsv"
    corpus.write_text('{"_id": "d1", "title": "t", "text": "x"}\n')
    queries.write_text('{"_id": "q1", "text": "x"}\n')
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    result = CliRunner().invoke(main, ["eval", "retrieval", "--corpus", str(corpus), "--queries", str(queries),
                                       "--qrels", str(qrels), "--filter", '{"and": [{"range": {"key": "n"}}]}'])
    assert result.exit_code != 0
    assert "--filter: filter['and'][0]['range']: a range needs at least one of gt, gte, lt, lte" in result.output


def test_the_iterative_loop_takes_the_jobs_filter_and_refuses_one_of_its_own():
    from agentsearch.pipeline.agentic.config import IterativeConfig
    from agentsearch.pipeline.agentic.runtime import job_filter

    assert job_filter({"strategy": "keyword", "filter": eq("region", "emea")}) == {"filter": eq("region", "emea")}
    assert job_filter({"strategy": "keyword"}) == {}
    with pytest.raises(ValidationError, match="set once for the whole job"):
        IterativeConfig(search={"filter": eq("region", "emea")})


def test_the_runner_binds_an_agents_toolbox_to_the_jobs_filter(make_runner):
    from agentsearch.pipeline.agents.base import PreSearchAgent, PreSearchInput, PreSearchOutput
    from agentsearch.pipeline.records.agent_runs import AgentSpec

    class Tools:
        def __init__(self, search_filter=None):
            self.search_filter = search_filter

        def for_user(self, user_id):
            return Tools()

        def with_filter(self, search_filter):
            return Tools(build(search_filter))

    class Expander(PreSearchAgent):
        agent_id = "expander_probe"
        cacheable = False

        def run(self, inp, ctx):
            return PreSearchOutput(query=inp.query, metadata={"filter": ctx.tools.search_filter})

    runner = make_runner(Expander, tools=Tools())
    spec = AgentSpec(agent_id="expander_probe", stage=Stage.PRE_SEARCH)
    _, out = runner.run(spec, PreSearchInput(query="q"), AgentContext(
        pipeline_stage=Stage.PRE_SEARCH, search_filter=eq("region", "emea")))
    assert out.metadata["filter"] == build(eq("region", "emea"))
    _, out = runner.run(spec, PreSearchInput(query="q"), AgentContext(pipeline_stage=Stage.PRE_SEARCH))
    assert out.metadata["filter"] is None
