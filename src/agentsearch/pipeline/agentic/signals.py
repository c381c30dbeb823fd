"""Text signals the offline paths share: query-term coverage, and the specifics (names, numbers, dates) a
sentence carries.

Usage::

    coverage(analyzer, "solar output 2025", "Solar output rose in 2025.")      # 1.0
    specifics("Northwind earned $412 million in Q4 2025.")                     # {"numbers": [...], "names": [...]}
    cosine([1.0, 0.0], [1.0, 0.0])                                            # 1.0
"""

from __future__ import annotations

import math
import re

from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.text import STOPWORDS

_NUMBER = re.compile(r"(?<![\w.])[-+]?\$?\d+(?:[.,]\d+)*%?(?!\w)|\b\d+(?:st|nd|rd|th)\b")
_DATE = re.compile(
    r"\b(?:1\d{3}|20\d{2})\b|\b\d{4}-\d{2}-\d{2}\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
    r"\s+\d{1,2}\b|\bQ[1-4]\b",
    re.IGNORECASE,
)
# A capitalised word that is not a sentence's first word: a proper name, an organisation, a product.
_NAME = re.compile(r"(?<=[a-z0-9,;:)]\s)[A-Z][\w'’&-]*(?:\s+[A-Z][\w'’&-]*)*")
_CODE = re.compile(r"\b[A-Z]{2,}[\w-]*\b")


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def query_stems(analyzer: KeywordAnalyzer, query: str) -> list[str]:
    """The query's distinct stemmed content terms, in order."""
    return list(dict.fromkeys(analyzer.terms(query)))


def coverage(analyzer: KeywordAnalyzer, query: str, text: str) -> float:
    """Share of the query's stemmed content terms that occur in ``text`` (0 when the query has none)."""
    wanted = query_stems(analyzer, query)
    if not wanted:
        return 0.0
    have = set(analyzer.terms(text))
    return sum(1 for t in wanted if t in have) / len(wanted)


def specifics(sentence: str) -> dict[str, list[str]]:
    """Names, numbers and dates in a sentence: what a compressed text must not lose."""
    names = [m.group(0) for m in _NAME.finditer(sentence) if m.group(0).lower() not in STOPWORDS]
    names += [m.group(0) for m in _CODE.finditer(sentence) if m.group(0) not in names]
    return {
        "numbers": [m.group(0) for m in _NUMBER.finditer(sentence)],
        "dates": [m.group(0) for m in _DATE.finditer(sentence)],
        "names": names,
    }


def has_specifics(sentence: str) -> bool:
    found = specifics(sentence)
    return any(found.values())


def numbers_in(text: str) -> set[str]:
    """Digits-only forms of the numbers in ``text`` ("$1,200.5" -> "12005"), for comparing two texts."""
    return {re.sub(r"\D", "", m.group(0)) for m in _NUMBER.finditer(text) if re.sub(r"\D", "", m.group(0))}
