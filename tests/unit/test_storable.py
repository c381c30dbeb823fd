"""What the service can keep: NUL characters, lone surrogates and non-finite numbers are found with their paths."""

from __future__ import annotations

import pytest

from pipeline.security.storable import MAX_PROBLEMS, NotStorable, loads_checked, problems, text_problem


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
        loads_checked('{"x": [%s]}' % literal, ("body",))
    assert caught.value.problems == [(("body", "x", 0), "must be a finite number")]


def test_a_huge_bad_body_is_reported_briefly():
    assert len(list(problems(["\x00"] * 10_000))) == MAX_PROBLEMS
