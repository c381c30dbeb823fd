"""A config's map of a word or label to its phrases (a query expander's synonyms, an intent classifier's examples),
read the one way both agents read it: the keys and phrases stripped, blank phrases left out, a blank key refused.

Usage::

    cleaned = phrase_lists(value, blank_key="a synonym key must not be empty",
                           no_phrases="synonyms of {key!r} need at least one non-empty entry")
"""

from __future__ import annotations


def phrase_lists(value: dict[str, list[str]], blank_key: str, no_phrases: str | None) -> dict[str, list[str]]:
    """``value`` with its keys and phrases stripped and its blank phrases dropped. A blank key raises
    ``ValueError(blank_key)``; a key left without phrases raises ``ValueError(no_phrases.format(key=key))``, or is
    dropped when ``no_phrases`` is None."""
    cleaned: dict[str, list[str]] = {}
    for key, phrases in value.items():
        if not key.strip():
            raise ValueError(blank_key)
        kept = [p.strip() for p in phrases if p.strip()]
        if kept:
            cleaned[key.strip()] = kept
        elif no_phrases is not None:
            raise ValueError(no_phrases.format(key=key))
    return cleaned
