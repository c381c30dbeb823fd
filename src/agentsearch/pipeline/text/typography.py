"""One typographic form for texts compared word by word: a model writes "20-18" where its source writes "20–18",
"5.5" for "5½", straight quotes for curly ones, "68500" for "68,500", "12 percent" for "12%".

``fold_typography`` maps each character on its own (``fold_char``, which ``spans.find_loose`` uses so that a found
quote's offsets still point into the original), then joins a number's thousands commas:

- every dash and minus (‐ ‑ ‒ – — ― −) is ``-``; curly, low and angle quotes are ``'`` or ``"``; the
  non-breaking and thin spaces are spaces;
- a vulgar fraction is its decimal part: "5½" is "5.5", "¾" alone is "0.75";
- ``%`` is " percent" (and "per cent" reads as "percent");
- a number's thousands commas go: "68,500" is "68500" (three digits after each comma; "3,5" stays).

Usage::

    fold_typography("The 5½-mile race ended 20–18 with “68,500” fans (12%).")
    # 'The 5.5-mile race ended 20-18 with "68500" fans (12 percent).'
"""

from __future__ import annotations

import re

_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
_SINGLE = "\u2018\u2019\u201a\u201b\u2032\u02bc"
_DOUBLE = "\u201c\u201d\u201e\u201f\u00ab\u00bb\u2033"
_SPACES = "\u00a0\u2007\u2009\u202f\u200a"
_FRACTIONS = {"½": ".5", "¼": ".25", "¾": ".75", "⅓": ".33", "⅔": ".67", "⅕": ".2", "⅖": ".4", "⅗": ".6",
              "⅘": ".8", "⅙": ".17", "⅚": ".83", "⅛": ".125", "⅜": ".375", "⅝": ".625", "⅞": ".875", "⅒": ".1"}
_TABLE: dict[str, str] = {
    **dict.fromkeys(_DASHES, "-"), **dict.fromkeys(_SINGLE, "'"), **dict.fromkeys(_DOUBLE, '"'),
    **dict.fromkeys(_SPACES, " "), "%": " percent",
}
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?!\d)(?![.,]\d)")
_PER_CENT = re.compile(r"\bper cent\b", re.IGNORECASE)


def fold_char(text: str, i: int) -> str:
    """The ``i``-th character of ``text`` in the folded form (one character or more)."""
    char = text[i]
    if char in _FRACTIONS:
        # "5½" is 5.5; a fraction with no digit before it is a number of its own, "0.75".
        return _FRACTIONS[char] if i and text[i - 1].isdigit() else "0" + _FRACTIONS[char]
    return _TABLE.get(char, char)


def fold_typography(text: str) -> str:
    """``text`` in one typographic form (see the module docstring)."""
    if text.isascii() and "%" not in text and "," not in text and "per cent" not in text.lower():
        return text
    folded = "".join(fold_char(text, i) for i in range(len(text)))
    folded = _PER_CENT.sub("percent", folded)
    return _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), folded)
