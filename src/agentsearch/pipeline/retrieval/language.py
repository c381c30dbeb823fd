"""Which language a text is written in: its script first, then a language model of the text where a script is
shared by many languages.

A script alone settles Chinese (Han without kana), Japanese (kana), Korean (Hangul), Thai, Greek, Hebrew and the
other scripts one language mostly owns. Latin, Cyrillic, Arabic and Devanagari are shared, so there ``py3langid``
(a naive Bayes model shipped inside its wheel: no download) names the language; it is about four times faster than
langdetect on a 1,000-character chunk and gets more short questions right (measured on XQuAD: docs/evaluation.md).
The model loads on the first text of such a script, never at import: it is unpacked once per host into the model
cache folder and mapped from there (``src/agentsearch/pipeline/text/mapped_language_model.py``), so a process holds only
the parts its texts read.

A text with no letters at all (digits, emoji, symbols) is ``und`` (ISO 639's "undetermined"), confidence 0.

Usage::

    detect_language("Wie viele Sacks erzielte Jared Allen?")   # Detected(code="de", confidence=0.99, script="latin")
    detect_language("超级碗50的冠军是谁？").code                  # "zh"
    detect_language("🙂 ✓ 42").code                              # "und"
"""

from __future__ import annotations

import threading
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

UNDETERMINED = "und"
MIN_CONFIDENCE = 0.5
# Enough of a chunk to name its language; the model's time grows with the text (1,200 characters took three times
# as long, for the same languages on SciFact and XQuAD).
_SAMPLE_CHARS = 400
_SCRIPT_CHARS = 4000

# Codes the model answers with that name a variety of a language the analysers know.
_MACRO = {"arz": "ar", "ary": "ar", "wuu": "zh", "yue": "zh", "nb": "no", "nn": "no", "lb": "de", "zh-cn": "zh",
          "zh-tw": "zh"}

# Scripts one language mostly owns: the script decides.
_SCRIPT_LANGUAGE = {"hangul": "ko", "thai": "th", "greek": "el", "hebrew": "he", "armenian": "hy", "georgian": "ka",
                    "bengali": "bn", "tamil": "ta", "gujarati": "gu", "gurmukhi": "pa", "telugu": "te",
                    "kannada": "kn", "malayalam": "ml", "sinhala": "si", "khmer": "km", "lao": "lo", "myanmar": "my",
                    "ethiopic": "am"}
# Shared scripts: the model decides among the languages that write in it, or this one when it cannot.
_SCRIPT_DEFAULT = {"latin": "en", "cyrillic": "ru", "arabic": "ar", "devanagari": "hi"}
_MODEL_SCRIPTS = frozenset(_SCRIPT_DEFAULT)


# The scripts an embedding model was trained to read; a model not named here is taken to read every script.
EMBEDDING_SCRIPTS: dict[str, frozenset[str]] = {
    "all-MiniLM-L6-v2": frozenset({"latin"}),
    "sentence-transformers/all-MiniLM-L6-v2": frozenset({"latin"}),
}

# The languages an embedding model learnt, where they are fewer than its scripts: MiniLM reads Latin script but was
# trained on English. Its cosines still help fuse a Spanish search, but a Spanish question's cosine with single
# Spanish sentences ranks poorly (XQuAD es, the best sentence alone: nDCG@10 0.73 against 0.97 for keywords), so
# the search's sentence signal is left out for the others. A model not named here is taken to know every language.
EMBEDDING_LANGUAGES: dict[str, frozenset[str]] = {
    "all-MiniLM-L6-v2": frozenset({"en"}),
    "sentence-transformers/all-MiniLM-L6-v2": frozenset({"en"}),
}


def embedding_learnt(model: str | None, language: str) -> bool:
    """Whether the embedding model ``model`` learnt ``language`` (an ISO code): a model not named in
    ``EMBEDDING_LANGUAGES``, or none named, is taken to know every language."""
    return model is None or language in EMBEDDING_LANGUAGES.get(model, {language})


@dataclass(frozen=True)
class Detected:
    code: str
    confidence: float
    script: str


@lru_cache(maxsize=8192)
def script_of(char: str) -> str:
    """The script of one letter, by its Unicode name ("LATIN SMALL LETTER A" -> "latin"); "" for a non-letter."""
    if not char.isalpha():
        return ""
    name = unicodedata.name(char, "")
    if name.startswith("CJK ") or name.startswith("KANGXI"):
        return "han"
    if name.startswith(("HIRAGANA", "KATAKANA")):
        return "kana"
    if name.startswith("HANGUL"):
        return "hangul"
    first = name.split(" ", 1)[0].lower()
    return first or "other"


def script_counts(text: str) -> dict[str, int]:
    """Letters per script. Characters are counted first and each distinct one named once: a text repeats a few
    dozen letters, and naming every character was four fifths of language detection's time at ingest."""
    counts: dict[str, int] = {}
    for char, n in Counter(text).items():
        if script := script_of(char):
            counts[script] = counts.get(script, 0) + n
    return counts


_model = None
_model_lock = threading.Lock()


def _identifier():
    global _model
    with _model_lock:
        if _model is None:
            from agentsearch.pipeline.platform.settings import get_settings
            from agentsearch.pipeline.text.mapped_language_model import load_identifier

            _model = load_identifier(get_settings().model_cache_dir)
        return _model


def warm_up() -> None:
    """Load the language model now (a worker's start), not on the first query."""
    _identifier()


def _script_of_text(counts: dict[str, int]) -> str:
    han, kana = counts.get("han", 0), counts.get("kana", 0)
    # Japanese mixes kanji with kana; Chinese has no kana at all.
    if kana and kana * 10 >= han + kana:
        return "kana"
    return max(counts, key=lambda s: counts[s] + (kana if s == "han" else 0))


def by_script(text: str) -> Detected | None:
    """The language when the text's script settles it (no model), ``und`` without letters; None for the shared
    scripts (Latin, Cyrillic, Arabic, Devanagari), where only a model of the language can tell."""
    return _settled(_text_scripts(text))


def _text_scripts(text: str) -> dict[str, int]:
    # The whole text (to a bound) is counted, not the model's sample: a chunk that starts in German and goes on
    # in Chinese for twice as long is Chinese. NFKC: full-width letters are their script's plain letters.
    return script_counts(unicodedata.normalize("NFKC", text[:_SCRIPT_CHARS]))


def _settled(counts: dict[str, int]) -> Detected | None:
    if not counts:
        return Detected(UNDETERMINED, 0.0, "")
    script = _script_of_text(counts)
    share = (counts.get(script, 0) + (counts.get("han", 0) if script == "kana" else 0)) / sum(counts.values())
    if script == "han":
        return Detected("zh", round(share, 4), script)
    if script == "kana":
        return Detected("ja", round(share, 4), script)
    if script in _SCRIPT_LANGUAGE:
        return Detected(_SCRIPT_LANGUAGE[script], round(share, 4), script)
    if script not in _MODEL_SCRIPTS:
        return Detected(UNDETERMINED, 0.0, script)
    return None


def detect_language(text: str) -> Detected:
    counts = _text_scripts(text)
    settled = _settled(counts)
    if settled is not None:
        return settled
    script = _script_of_text(counts)
    sample = unicodedata.normalize("NFKC", text[:_SAMPLE_CHARS])
    code, confidence = _identifier().classify(sample)
    code = _MACRO.get(code, code)
    if confidence < MIN_CONFIDENCE:
        # An unsure reading (an English paragraph of names and numbers read as Nigerian Pidgin at 0.38): the
        # script's main language analyses it, and the confidence says how unsure that is.
        return Detected(_SCRIPT_DEFAULT[script], round(float(confidence), 4), script)
    if not any(script_of(c) == script for c in _probe(code)):
        # The model named a language of another script (it sees bytes, not scripts): trust the script.
        return Detected(_SCRIPT_DEFAULT[script], 0.0, script)
    return Detected(code, round(float(confidence), 4), script)


# One letter of a language's usual script, to check that the model's answer fits the text's script.
_PROBE = {"ru": "я", "uk": "я", "bg": "я", "be": "я", "sr": "я", "mk": "я", "kk": "я", "ky": "я", "mn": "я",
          "tg": "я", "ar": "ع", "fa": "ع", "ur": "ع", "ps": "ع", "ug": "ع", "ku": "a", "hi": "क", "mr": "क",
          "ne": "क", "sa": "क"}


def _probe(code: str) -> str:
    return _PROBE.get(code, "a")
