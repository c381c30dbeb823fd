"""What a question asks for (a number, a time, a name), read from its question words, and whether a sentence holds
one: the extractive answer prefers a sentence that holds the kind of thing asked for.

The question words are English, German and Spanish. Tables for Arabic, Chinese, Hindi, Romanian, Russian and Thai
were tried and moved the gold-span rate by two questions of 300 or fewer, either way (docs/evaluation.md), so a
question in another language has no kind and its sentences are scored without it. A year is read from its digits
in every script (in Chinese and Japanese it runs into its 年).

Usage::

    question_kind("How many interceptions did the Panthers make?")   # "number"
    holds_kind("The defense made 24 interceptions.", "number", {"how", "many", "interceptions"})   # True
"""

from __future__ import annotations

import re

from agentsearch.pipeline.text import STOPWORDS, words

# The first match wins, so the more specific phrases come first. "number" = a quantity, "time" = a date, year or
# duration, "name" = a proper name or a place.
_ASKS: list[tuple[str, str]] = [
    # English
    (r"\bhow (?:many|much|long|old|far|large|big|tall|high|often|wide|deep|heavy)\b", "number"),
    (r"\bwhat (?:percentage|percent|number|amount|proportion|fraction)\b", "number"),
    (r"\b(?:what|which) (?:year|decade|century|month|day|date|time|period|era)\b|\bwhen\b|\bsince when\b", "time"),
    (r"\bwho(?:m|se)?\b|\bwhat (?:person|man|woman|company|organi[sz]ation|team|group)\b", "name"),
    (r"\bwhere\b|\bwhat (?:city|country|state|place|region|continent|river|location)\b", "name"),
    # German
    (r"\bwie (?:viele?|lange?|alt|weit|gro(?:ß|ss)|hoch|oft)\b|\bwieviele?\b", "number"),
    (r"\bwann\b|\bin welchem jahr\b|\bseit wann\b|\bwelche[mnrs]? (?:jahr|jahrhundert|datum)\b", "time"),
    (r"\bwer\b|\bwe[mn]\b|\bwessen\b", "name"),
    (r"\bwo(?:her|hin)?\b", "name"),
    # Spanish
    (r"\bcu[aá]nt[oa]s?\b|\bqu[eé] (?:porcentaje|cantidad|n[uú]mero)\b", "number"),
    (r"\bcu[aá]ndo\b|\b(?:en )?qu[eé] (?:a[nñ]o|siglo|fecha|d[eé]cada)\b", "time"),
    (r"\bqui[eé]n(?:es)?\b|\bde qui[eé]n\b", "name"),
    (r"\bd[oó]nde\b|\badonde\b", "name"),
]
_ASKS_COMPILED = [(re.compile(p, re.IGNORECASE), kind) for p, kind in _ASKS]
_NUMBER_WORDS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million
    billion trillion dozen half once twice ein eine zwei drei vier fünf sechs sieben acht neun zehn elf zwölf
    zwanzig hundert tausend million milliarde uno una dos tres cuatro cinco seis siete ocho nueve diez once doce
    veinte cien ciento mil millón millones""".split()
)
_MONTHS = frozenset(
    """january february march april may june july august september october november december januar februar märz
    mai juni juli oktober dezember enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre
    diciembre century centuries jahrhundert siglo""".split()
)
_DIGITS = re.compile(r"\d")
# A year or an ordinal day, not part of a longer number: in Chinese and Japanese a year runs into its 年.
_YEAR = re.compile(r"(?<!\d)(?:1\d{3}|20\d{2})(?!\d)|\b\d{1,2}(?:st|nd|rd|th)\b")
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-ZÄÖÜÁÉÍÓÚÑ][\w'’-]+")
# German capitalises every noun, so a capital says little there.
_GERMAN = re.compile(r"\b(?:wie|wer|wann|wo|welche[mnrs]?|was)\b", re.IGNORECASE)
_ENGLISH = re.compile(r"\b(?:who|what|when|where|how|which)\b", re.IGNORECASE)


def question_kind(query: str) -> str | None:
    """What the question asks for: "number", "time", "name", or None when its words do not say."""
    for pattern, kind in _ASKS_COMPILED:
        if pattern.search(query):
            return kind
    return None


def capitals_say_little(query: str) -> bool:
    """A German question: its sentences capitalise every noun, so a capital does not mark a name."""
    return bool(_GERMAN.search(query)) and not _ENGLISH.search(query)


def holds_kind(sentence: str, kind: str | None, query_words: set[str], german: bool = False) -> bool:
    """Does the sentence hold something of the asked kind that the question itself does not say?"""
    if kind is None:
        return False
    tokens = [w for w in words(sentence) if w not in query_words]
    if kind == "number":
        return any(_DIGITS.search(w) or w in _NUMBER_WORDS for w in tokens)
    if kind == "time":
        fresh = " ".join(tokens)
        return bool(_YEAR.search(fresh)) or any(w in _MONTHS for w in tokens)
    # A name: a capitalised word that is not the sentence's first and not in the question.
    if german:
        return False
    return any(m.group(0).lower() not in query_words and m.group(0).lower() not in STOPWORDS
               for m in _CAPITALISED.finditer(sentence))
