"""A config's map of keys to phrases, read alike by the query expander (synonyms) and intent classifier (examples)."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.agents.phrase_lists import phrase_lists


def test_keys_and_phrases_are_stripped_and_blank_phrases_left_out():
    assert phrase_lists({" PPA ": [" power purchase agreement ", " ", ""]}, "blank", None) == {
        "PPA": ["power purchase agreement"]}


def test_a_blank_key_is_refused_with_the_callers_words():
    with pytest.raises(ValueError, match="a synonym key must not be empty"):
        phrase_lists({" ": ["x"]}, "a synonym key must not be empty", None)


def test_a_key_left_without_phrases_is_refused_naming_it_or_dropped():
    with pytest.raises(ValueError, match="synonyms of 'solar' need"):
        phrase_lists({"solar": [" "]}, "blank", "synonyms of {key!r} need at least one non-empty entry")
    assert phrase_lists({"solar": [" "], "wind": ["turbine"]}, "blank", None) == {"wind": ["turbine"]}
