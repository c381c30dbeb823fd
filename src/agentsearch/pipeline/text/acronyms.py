"""Acronym definitions mined from text: "power purchase agreement (PPA)" -> {"PPA": "power purchase agreement"}.

A simplified Schwartz-Hearst: for a parenthesised short form, walk back from the end of the preceding words and
match the short form's letters, right to left, to word starts and inner letters; the first letter must start a word.

Usage::

    mine_acronyms(["Our power purchase agreement (PPA) runs to 2040."])   # {"PPA": "power purchase agreement"}
"""

from __future__ import annotations

import re
from collections import Counter

_PAREN = re.compile(r"\(([A-Z][A-Za-z0-9&-]{1,9})\)")


def _long_form(short: str, before: str) -> str | None:
    words = before.split()[-(min(len(short) + 5, len(short) * 2)):]
    candidate = " ".join(words)
    s_i, l_i = len(short) - 1, len(candidate) - 1
    while s_i >= 0:
        ch = short[s_i].lower()
        if not ch.isalnum():
            s_i -= 1
            continue
        while l_i >= 0 and (candidate[l_i].lower() != ch or (s_i == 0 and l_i > 0 and candidate[l_i - 1].isalnum())):
            l_i -= 1
        if l_i < 0:
            return None
        s_i -= 1
        l_i -= 1
    start = candidate.rfind(" ", 0, l_i + 1) + 1
    long_form = candidate[start:].strip(" ,;:")
    if not long_form or len(long_form.split()) > len(short) + 3 or long_form.lower() == short.lower():
        return None
    return long_form


_NUMBER_WORDS = {
    "one": "1", "first": "1", "two": "2", "second": "2", "three": "3", "third": "3", "four": "4", "fourth": "4",
    "five": "5", "fifth": "5", "six": "6", "sixth": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10",
}


def _numbered_long_form(short: str, before: str) -> str | None:
    """Short forms with digits ("Q4", "G7") name their words in any order: "fourth quarter (Q4)"."""
    words = before.split()[-len(short):]
    initials = sorted(_NUMBER_WORDS.get(w.lower().strip(",;:"), w[:1].lower()) for w in words)
    return " ".join(words).strip(" ,;:") if initials == sorted(short.lower()) else None


def mine_acronyms(texts: list[str]) -> dict[str, str]:
    """The most frequent definition of each acronym found in the texts."""
    seen: dict[str, Counter] = {}
    for text in texts:
        for match in _PAREN.finditer(text):
            short = match.group(1)
            if sum(c.isupper() for c in short) < 2 and not any(c.isdigit() for c in short):
                continue
            before = text[: match.start()].rstrip()
            long_form = _long_form(short, before) or (
                _numbered_long_form(short, before) if any(c.isdigit() for c in short) else None
            )
            if long_form:
                seen.setdefault(short, Counter())[long_form.lower()] += 1
    return {short: counts.most_common(1)[0][0] for short, counts in seen.items()}
