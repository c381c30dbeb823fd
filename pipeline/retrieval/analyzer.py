"""Keyword analysis for BM25: lower-case words, stop words dropped, Snowball stems.

Milvus computes BM25 over whatever text it is given, but its built-in analyzer does not stem. So agentsearch
stems in Python and hands Milvus the stemmed text, at ingest and at query time alike: "turbines" and "turbine"
then meet in the index, on every Milvus backend.

Usage::

    analyzer = KeywordAnalyzer("english")
    analyzer.analyze("Wind turbines need maintenance")   # "wind turbin need mainten"
"""

from __future__ import annotations

from functools import lru_cache

import Stemmer

from pipeline.text import STOPWORDS, words


@lru_cache(maxsize=8)
def _stemmer(language: str) -> Stemmer.Stemmer:
    return Stemmer.Stemmer(language)


class KeywordAnalyzer:
    def __init__(self, language: str = "english") -> None:
        if language not in Stemmer.algorithms():
            raise ValueError(f"no stemmer for {language!r}; known: {', '.join(Stemmer.algorithms())}")
        self.language = language
        # The stop list is English; for other languages only stemming applies.
        self._stop = STOPWORDS if language == "english" else frozenset()

    def terms(self, text: str) -> list[str]:
        return _stemmer(self.language).stemWords([w for w in words(text) if w not in self._stop])

    def analyze(self, text: str) -> str:
        return " ".join(self.terms(text))
