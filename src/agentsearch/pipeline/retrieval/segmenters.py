"""Words of the languages written without spaces: Chinese (jieba), Japanese (fugashi with unidic-lite) and Thai
(pythainlp); character bigrams for the other scripts without spaces (Khmer, Lao, Myanmar, and Han or kana met
where no segmenter fits).

Each library loads on the first text that needs it, never at import: jieba's dictionary takes seconds to load and
pythainlp seconds to import, and a collection in English should pay neither.

Usage::

    segment("zh", "超级碗50的冠军")      # ["超级", "碗", "50", "的", "冠军"]
    segment("ja", "東京都に住んでいます")  # ["東京", "都", "住む", ...] (base forms; particles dropped)
    japanese_dictionary()                 # False where unidic-lite is not installed: bigrams instead
    segment("th", "ภาษาไทยเป็นภาษา")      # ["ภาษาไทย", "เป็น", "ภาษา"]
    bigrams("ខ្ញុំស្រឡាញ់")                   # overlapping pairs of characters
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from functools import lru_cache

SEGMENTED = frozenset({"zh", "ja", "th"})
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _jieba():
    with _lock:
        import jieba

        jieba.setLogLevel(logging.WARNING)  # it logs the dictionary's load at INFO on every process
        jieba.initialize()
        return jieba


@lru_cache(maxsize=1)
def japanese_dictionary() -> bool:
    """Whether fugashi has a dictionary to read Japanese words with (unidic-lite, or the full unidic). The image
    leaves unidic-lite out (260 MB) unless built with JAPANESE=true: Japanese is then cut into character bigrams,
    in the index and in the questions alike."""
    return any(importlib.util.find_spec(name) is not None for name in ("unidic_lite", "unidic"))


@lru_cache(maxsize=1)
def _fugashi_tagger():
    with _lock:
        import fugashi

        return fugashi.Tagger()  # unidic-lite's dictionary, found by fugashi on its own


@lru_cache(maxsize=1)
def _thai_tokenize():
    with _lock:
        from pythainlp.tokenize import word_tokenize

        return word_tokenize


# Japanese parts of speech that carry no search meaning: particles, auxiliary verbs, symbols, blanks.
_JA_SKIP = frozenset({"助詞", "助動詞", "補助記号", "記号", "空白"})


def segment(language: str, text: str) -> list[str]:
    """The words of ``text`` by the language's segmenter (punctuation comes back too; the caller drops it)."""
    if language == "zh":
        # The search mode adds the short words inside long ones ("橄榄球" also as "橄榄"), so a question that
        # writes the shorter word still meets the passage.
        return _jieba().lcut_for_search(text)
    if language == "ja":
        out = []
        for word in _fugashi_tagger()(text):
            feature = word.feature
            if getattr(feature, "pos1", None) in _JA_SKIP:
                continue
            base = getattr(feature, "orthBase", None)
            out.append(base if base and base != "*" else word.surface)
        return out
    if language == "th":
        return _thai_tokenize()(text, engine="newmm", keep_whitespace=False)
    raise ValueError(f"no segmenter for {language!r}")


def bigrams(run: str) -> list[str]:
    """Overlapping character pairs of a run of letters with no spaces: the usual fallback for such scripts."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i : i + 2] for i in range(len(run) - 1)]
