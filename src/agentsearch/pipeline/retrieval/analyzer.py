"""Keyword analysis for BM25, per language: words, stop words dropped, Snowball stems; word segmentation for the
languages written without spaces.

Milvus computes BM25 over whatever text it is given, but its built-in analyzer neither stems nor knows a language.
So agentsearch analyses in Python and hands Milvus the analysed text, at ingest and at query time alike: "turbines"
and "turbine" then meet in the index, on every Milvus backend.

How a text is analysed:

- NFKC first (full-width letters, ligatures and compatibility forms become their plain letters), then lower case.
- Words keep their combining marks: Devanagari vowel signs, Thai vowels and Arabic harakat are part of a word, not
  a boundary (a plain ``\\w+`` cuts "नमस्ते" into pieces).
- Each word is analysed by its own script: a word in the text language's script is stemmed by that language's
  Snowball stemmer (stop words dropped); Chinese, Japanese and Thai runs are segmented into words
  (``agentsearch.pipeline.retrieval.segmenters``); Hangul and the other scripts without spaces become character bigrams;
  a word of another script is stemmed by its script's usual stemmer (a Latin name in a Russian text by the English one),
  so mixed-script text meets the same terms a text in that script alone would.
- A language with no stemmer keeps its words whole (Arabic and Hebrew vowel points removed: they are optional).
- Nothing that has words comes out empty: a text made only of stop words keeps them.

``KeywordAnalyzer("auto")`` names each text's language first (``agentsearch.pipeline.retrieval.language``); a fixed
language (a Snowball name such as ``"english"`` or an ISO code such as ``"de"``) analyses everything as that language.

Stop words: English keeps the project's own list (``agentsearch.pipeline.text.STOPWORDS``, what the SciFact figures were
measured with); the other languages have none, measured: stopwords-iso's lists cost nDCG on XQuAD (they hold
content words such as "москва" and "مليون"), and BM25's IDF already gives function words little weight.

Usage::

    analyzer = KeywordAnalyzer("english")
    analyzer.analyze("Wind turbines need maintenance")    # "wind turbin need mainten"
    auto = KeywordAnalyzer("auto")
    auto.analyze_detected("Windturbinen brauchen Wartung")  # ("de", "windturbin brauch wartung")
    auto.query_terms("Wer führte die Panthers an?", languages=["en", "de"])   # German stems + English stems
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

import Stemmer

from agentsearch.pipeline.retrieval.language import UNDETERMINED, detect_language, script_of
from agentsearch.pipeline.retrieval.segmenters import bigrams, japanese_dictionary, segment
from agentsearch.pipeline.text import STOPWORDS

AUTO = "auto"

# ISO 639-1 code -> Snowball stemmer (PyStemmer's names).
SNOWBALL = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech", "da": "danish", "nl": "dutch",
    "en": "english", "eo": "esperanto", "et": "estonian", "fi": "finnish", "fr": "french", "de": "german",
    "el": "greek", "hi": "hindi", "hu": "hungarian", "id": "indonesian", "ms": "indonesian", "ga": "irish",
    "it": "italian", "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "fa": "persian", "pl": "polish",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "st": "sesotho", "es": "spanish",
    "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}
_CODE_OF = {name: code for code, name in SNOWBALL.items() if code != "ms"} | {"porter": "en", "dutch_porter": "nl"}

# The script a language is written in, where it is not Latin.
_SCRIPT = {
    "ar": "arabic", "fa": "arabic", "ur": "arabic", "ps": "arabic", "hy": "armenian", "el": "greek",
    "hi": "devanagari", "mr": "devanagari", "ne": "devanagari", "sa": "devanagari", "ru": "cyrillic",
    "uk": "cyrillic", "bg": "cyrillic", "be": "cyrillic", "mk": "cyrillic", "kk": "cyrillic", "ky": "cyrillic",
    "mn": "cyrillic", "tg": "cyrillic", "ta": "tamil", "yi": "hebrew", "he": "hebrew", "zh": "han", "ja": "kana",
    "ko": "hangul", "th": "thai",
}
# A word of a script that is not its text's: stemmed as this language would.
_SCRIPT_STEMMER = {"latin": "english", "cyrillic": "russian", "arabic": "arabic", "devanagari": "hindi",
                   "greek": "greek", "armenian": "armenian", "tamil": "tamil"}
# Scripts written without spaces between words: a run of them is segmented, or cut into bigrams.
_UNSPACED = frozenset({"han", "kana", "thai", "hangul", "khmer", "lao", "myanmar", "tibetan"})
# Optional vowel points: the same word is written with or without them.
_POINTED = frozenset({"arabic", "hebrew"})


@lru_cache(maxsize=1)
def _word_pattern() -> re.Pattern:
    # Letters and digits, with the combining marks (Mn, Mc, Me) and zero-width joiners that belong inside words.
    ranges: list[str] = []
    start: int | None = None
    prev = 0
    for code in range(0x20000):  # past the SMP only variation selectors are marks
        if unicodedata.category(chr(code)).startswith("M"):
            if start is None:
                start = prev = code
            elif code == prev + 1:
                prev = code
            else:
                ranges.append(f"{_esc(start)}-{_esc(prev)}")
                start = prev = code
    if start is not None:
        ranges.append(f"{_esc(start)}-{_esc(prev)}")
    inside = "".join(ranges) + "\u200c\u200d"
    return re.compile(rf"(?:[^\W_]|[{inside}])+(?:['’-](?:[^\W_]|[{inside}])+)*")


def _esc(code: int) -> str:
    return f"\\U{code:08x}"


@lru_cache(maxsize=64)
def _stemmer(name: str) -> Stemmer.Stemmer:
    return Stemmer.Stemmer(name)


def _strip_points(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))


def _word_script(word: str) -> str:
    if word.isascii():
        return "latin" if any(c.isalpha() for c in word) else ""
    return next((s for s in map(script_of, word) if s), "")


def normalise_code(language: str) -> str:
    """An ISO 639-1 code for a Snowball name or a code ("german" -> "de", "zh-cn" -> "zh", "DE" -> "de")."""
    value = language.strip().lower()
    if value in _CODE_OF:
        return _CODE_OF[value]
    return value.split("-")[0].split("_")[0]


# Scripts whose words Milvus's own tokenizer keeps whole (checked on Milvus Lite). It cuts Devanagari and the
# other Brahmic scripts into syllables ("दुनिया" meets "द", "दु", "नि", "या"), so BM25 would score pieces.
_WHOLE_IN_MILVUS = frozenset({"latin", "cyrillic", "greek", "han", "kana", "hangul", "arabic", "hebrew", ""})
_HEX_AS_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")


def index_form(term: str) -> str:
    """The term as Milvus's tokenizer keeps it whole: itself, or for a term of a script it cuts (or with a
    combining mark) a fixed 18-letter stand-in (``zz`` + 64 bits of its hash, in letters), the same at ingest and at
    query time. Only the BM25 field holds it; ``terms`` stay readable."""
    if term.isascii() or (
        not any(unicodedata.category(c).startswith("M") for c in term)
        and all(script_of(c) in _WHOLE_IN_MILVUS for c in term if c.isalpha())
    ):
        return term
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=8).hexdigest()
    return "zz" + digest.translate(_HEX_AS_LETTERS)


def bm25_text(terms: Iterable[str]) -> str:
    """What Milvus's BM25 field is given: the terms in their index form, space-separated."""
    return " ".join(index_form(t) for t in terms)


def known_language(code: str) -> bool:
    """Whether an analyser of its own (a stemmer, a segmenter, or a script's rules) reads this ISO code."""
    return code in SNOWBALL or code in _SCRIPT


class _Language:
    """The analysis of one language; made once per process and language."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.script = _SCRIPT.get(code, "latin")
        self.stemmer = SNOWBALL.get(code)
        self.stop = STOPWORDS if code == "en" else frozenset()

    def terms(self, text: str) -> list[str]:
        if not text.isascii():  # ASCII is its own NFKC form, and the common case
            text = unicodedata.normalize("NFKC", text)
        text = text.lower()
        out: list[str] = []
        dropped: list[str] = []
        own: list[int] = []  # positions of the words the language's own stemmer takes, stemmed in one call
        for word in _word_pattern().findall(text):
            script = _word_script(word)
            if script in _UNSPACED:
                out.extend(self._unspaced(script, word))
            elif script == self.script or not script:  # no letters: digits, kept as they are
                if word in self.stop:
                    dropped.append(word)
                    continue
                if self.stemmer:
                    own.append(len(out))
                    out.append(word)
                else:
                    out.append(self._stem(None, word, script))
            else:
                out.append(self._stem(_SCRIPT_STEMMER.get(script), word, script))
        if own:
            for i, stem in zip(own, _stemmer(self.stemmer).stemWords([out[i] for i in own]), strict=True):
                out[i] = stem
        if not out and dropped:
            # Only stop words ("to be or not to be"): better those than nothing to search by.
            out = [self._stem(self.stemmer, w, self.script) for w in dropped]
        return [t for t in out if t]

    @staticmethod
    def _stem(stemmer: str | None, word: str, script: str) -> str:
        if stemmer:
            return _stemmer(stemmer).stemWord(word)
        return _strip_points(word) if script in _POINTED else word

    def _unspaced(self, script: str, run: str) -> list[str]:
        if script == "thai":
            words = segment("th", run)
        elif script == "kana" or (script == "han" and self.code == "ja"):
            if not japanese_dictionary():
                return bigrams(run)
            words = segment("ja", run)
        elif script == "han":
            words = segment("zh", run)
        else:
            return bigrams(run)
        # The segmenters hand back punctuation and spaces too.
        return [w for w in words if any(c.isalnum() for c in w)]


@lru_cache(maxsize=64)
def language_analysis(code: str) -> _Language:
    return _Language(code)


class KeywordAnalyzer:
    def __init__(self, language: str = "english") -> None:
        self.language = language
        if language == AUTO:
            self.code = AUTO
            return
        code = normalise_code(language)
        if not known_language(code):
            known = ", ".join(sorted({*SNOWBALL, *_SCRIPT}))
            raise ValueError(
                f"no stemmer or segmenter for {language!r}; use 'auto', a Snowball name or one of: {known}"
            )
        self.code = code

    @property
    def automatic(self) -> bool:
        return self.code == AUTO

    def language_of(self, text: str) -> str:
        """The ISO code this analyser reads ``text`` as: its own, or the detected one (``und`` with no letters)."""
        return detect_language(text).code if self.automatic else self.code

    def terms(self, text: str) -> list[str]:
        return self.terms_as(self.language_of(text), text)

    def analyze(self, text: str) -> str:
        """The BM25 field's text (``bm25_text`` of the terms)."""
        return bm25_text(self.terms(text))

    @staticmethod
    def terms_as(code: str, text: str) -> list[str]:
        # Undetermined text (digits and symbols) has no words a language would change.
        return language_analysis("en" if code == UNDETERMINED else code).terms(text)

    def analyze_detected(self, text: str) -> tuple[str, str]:
        """``(language, analysed text)``: what ingestion stores for a chunk."""
        code = self.language_of(text)
        return code, bm25_text(self.terms_as(code, text))

    def query_terms(self, text: str, languages: Iterable[str] = ()) -> tuple[list[str], list[str]]:
        """The query's terms and the languages that made them.

        The query's own language first; with ``auto``, also each of ``languages`` (the collection's) written in the
        same script, since a short query's language is a guess among those: a German question in a German and
        English collection is analysed as both, and meets each language's stems. Terms already there are not added
        twice."""
        own = self.language_of(text)
        used = [own]
        if self.automatic:
            script = _SCRIPT.get(own, "latin") if own != UNDETERMINED else None
            kin = [c for c in dict.fromkeys(languages) if c != UNDETERMINED
                   and (script is None or _SCRIPT.get(c, "latin") == script)]
            # A language the collection does not hold, in a script it does, is most often a misread short query
            # ("Jared Allen sacks" read as Dutch): the collection's languages of that script analyse it then.
            used = [own, *(c for c in kin if c != own)] if own in kin or not kin else kin
        terms = self.terms_as(used[0], text)
        seen = set(terms)
        for code in used[1:]:
            for term in self.terms_as(code, text):
                if term not in seen:
                    seen.add(term)
                    terms.append(term)
        return terms, used
