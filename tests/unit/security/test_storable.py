"""What the service can keep: NUL characters, lone surrogates, non-finite numbers and nesting past the limit are found
with their paths."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.security.storable import (
    DEPTH_MESSAGE,
    MAX_DEPTH,
    MAX_PROBLEMS,
    NotStorable,
    deeper_than,
    loads_checked,
    problems,
    text_problem,
)


def test_clean_values_have_no_problems():
    value = {"query": "Qu'est-ce que l'énergie éolienne? 风能 🌬", "top_k": 5, "w": 0.5, "tags": ["a", None, True]}
    assert list(problems(value)) == []
    assert loads_checked('{"a": [1.5, "ü"]}') == {"a": [1.5, "ü"]}


@pytest.mark.parametrize(
    "text, words",
    [("a\x00b", "NUL"), ("\ud800", "surrogate"), ("ok \udfff end", "surrogate"), ("é\x00", "NUL")],
)
def test_text_problems_are_named(text, words):
    assert words in text_problem(text)


def test_each_problem_comes_with_its_path():
    found = dict(problems({"search": {"half_life": float("inf")}, "docs": [{"text": "ok"}, {"text": "\x00"}],
                           "n": float("nan")}, ("body",)))
    assert found == {
        ("body", "search", "half_life"): "must be a finite number",
        ("body", "docs", 1, "text"): "must not contain NUL characters",
        ("body", "n"): "must be a finite number",
    }


def test_a_bad_key_is_named_by_its_position_not_echoed():
    found = list(problems({"fine": 1, "\ud800": 2}))
    assert found == [(("<key 1>",), "key must not contain lone UTF-16 surrogates (invalid Unicode)")]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
def test_json_literals_python_accepts_but_json_does_not_are_refused(literal):
    with pytest.raises(NotStorable) as caught:
        loads_checked(f'{{"x": [{literal}]}}', ("body",))
    assert caught.value.problems == [(("body", "x", 0), "must be a finite number")]


def test_a_huge_bad_body_is_reported_briefly():
    assert len(list(problems(["\x00"] * 10_000))) == MAX_PROBLEMS


def nested_lists(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_nesting_up_to_the_limit_is_kept_and_one_level_more_is_named_by_its_first_fields():
    assert list(problems(nested_lists(MAX_DEPTH))) == []
    assert list(problems(nested_lists(MAX_DEPTH + 1), ("body",))) == [(("body",), DEPTH_MESSAGE)]
    deep = {"documents": [{"id": "a", "metadata": {"source": "x"}},
                          {"id": "b", "metadata": {"k": nested_lists(MAX_DEPTH), "j": nested_lists(MAX_DEPTH)}}]}
    # body > documents > [1] > metadata > k: four levels above the lists, so the lists pass the limit; one problem
    # for the field that holds them, named by its first three steps, however many branches are too deep.
    assert list(problems(deep, ("body",))) == [(("body", "documents", 1, "metadata"), DEPTH_MESSAGE)]
    assert "64" in DEPTH_MESSAGE


def test_nesting_deeper_than_the_parser_goes_is_refused_not_raised():
    # Python's parser recurses per level: this deep it raised RecursionError, which nothing caught (a 500).
    for text in ("[" * 100_000 + "]" * 100_000, '{"a": ' * 5000 + "1" + "}" * 5000):
        with pytest.raises(NotStorable) as caught:
            loads_checked(text, ("body",))
        assert caught.value.problems == [(("body",), DEPTH_MESSAGE)]


def test_deeper_than_measures_any_depth_without_recursing():
    assert not deeper_than({"a": [1, {"b": "c"}]}, limit=3)
    assert deeper_than({"a": [1, {"b": ["c"]}]}, limit=3)
    assert not deeper_than(nested_lists(MAX_DEPTH)) and deeper_than(nested_lists(MAX_DEPTH + 1))
    assert deeper_than(nested_lists(50_000))  # far past the interpreter's recursion limit
