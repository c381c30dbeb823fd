"""Pre-search: correct misspelt words in the query with symspellpy, without "correcting" the collection's own terms.

Two dictionaries are consulted: symspellpy's bundled English frequency list (82,765 words, loaded once per process
by ``warm_up``; with its delete index in one sorted array, ``agentsearch.pipeline.text.spelling_index``, it takes 26 MiB
where it took 135) and the collection's vocabulary (``ctx.tools.vocabulary``), whose words count as known and, at an
equal edit distance, win over the English list as if they had a very high count. So "reveune" becomes "revenue"
while "Northwind" or "electrolyser" stay as they are when the collection uses them. Numbers, acronyms (all
capitals), words with digits, short words and words listed in ``keep`` are never touched; a correction keeps the
word's case pattern ("Reveune" -> "Revenue").

Usage::

    agent = SpellChecker({"max_edit_distance": 2})
    out = agent.run(PreSearchInput(query="Northwind reveune projecions", collection_id=cid), ctx)
    out.query                    # "Northwind revenue projections"
    out.metadata["corrections"]  # {"reveune": "revenue", "projecions": "projections"}
"""

from __future__ import annotations

import importlib.resources
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import ClassVar

from pydantic import Field
from symspellpy import SymSpell, Verbosity

from agentsearch.pipeline.agents.base import (
    AgentConfig,
    AgentContext,
    AgentSkipped,
    Loaded,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
)
from agentsearch.pipeline.text.spelling_index import CompactSymSpell

DICTIONARY_FILE = "frequency_dictionary_en_82_765.txt"
MAX_DISTANCE = 2
PREFIX_LENGTH = 7
# Letters only (apostrophes inside a word allowed): hyphenated words are checked part by part.
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")
_TOKEN = re.compile(r"\S+")

# Domain dictionaries of recently seen collections, by (collection id, epoch, vocabulary fingerprint).
_domain: OrderedDict[tuple, SymSpell] = OrderedDict()
_domain_lock = threading.Lock()
_DOMAIN_CACHE_SIZE = 16


def load_english_dictionary() -> SymSpell:
    """symspellpy's bundled English frequency dictionary (about a second to load)."""
    sym = CompactSymSpell(max_dictionary_edit_distance=MAX_DISTANCE, prefix_length=PREFIX_LENGTH)
    path = importlib.resources.files("symspellpy") / DICTIONARY_FILE
    with importlib.resources.as_file(path) as file:
        if not sym.load_dictionary(str(file), term_index=0, count_index=1, encoding="utf-8"):
            raise RuntimeError(f"could not load symspellpy's {DICTIONARY_FILE}")
    return sym.freeze()


def domain_dictionary(key: tuple, vocabulary: dict[str, int]) -> SymSpell:
    with _domain_lock:
        if key in _domain:
            _domain.move_to_end(key)
            return _domain[key]
    sym = CompactSymSpell(max_dictionary_edit_distance=MAX_DISTANCE, prefix_length=PREFIX_LENGTH)
    for word, count in vocabulary.items():
        sym.create_dictionary_entry(word, count)
    sym.freeze()
    with _domain_lock:
        _domain[key] = sym
        while len(_domain) > _DOMAIN_CACHE_SIZE:
            _domain.popitem(last=False)
    return sym


# The last vocabularies filtered, by identity: a toolbox that keeps a collection's vocabulary (AgentTools, per index
# epoch) hands the same dict to every job, and filtering and fingerprinting 18,000 words each time cost 10-35 ms.
_filtered: OrderedDict[tuple[int, int], tuple[dict, dict[str, int], int, frozenset[str]]] = OrderedDict()


def _known_words(vocabulary: dict[str, int], min_count: int) -> tuple[dict[str, int], int, frozenset[str]]:
    """The words of ``vocabulary`` that count as known (often enough, letters only), their fingerprint, and the
    words alone."""
    key = (id(vocabulary), min_count)
    with _domain_lock:
        hit = _filtered.get(key)
        if hit is not None and hit[0] is vocabulary:  # the entry holds the dict, so its id was not reused
            return hit[1], hit[2], hit[3]
    known = {w: c for w, c in vocabulary.items() if c >= min_count and _WORD.fullmatch(w)}
    fingerprint = hash(frozenset(known.items()))
    with _domain_lock:
        _filtered[key] = (vocabulary, known, fingerprint, frozenset(known))
        while len(_filtered) > _DOMAIN_CACHE_SIZE:
            _filtered.popitem(last=False)
        return _filtered[key][1:]


def _match_case(original: str, correction: str) -> str:
    if original.isupper():
        return correction.upper()
    if original[:1].isupper():
        return correction[:1].upper() + correction[1:]
    return correction


class SpellChecker(PreSearchAgent):
    agent_id = "spell_checker"
    version = "1"
    description = (
        "Corrects misspellings with symspellpy (bundled English dictionary) plus the collection's vocabulary, so "
        "domain terms are kept."
    )
    default_timeout_s = 15.0  # the first call in a process loads the dictionary (warm_up, within the deadline)
    cache_ttl_s = 3600
    # Loaded once per process, shared by every instance.
    english: ClassVar[Loaded[SymSpell]] = Loaded(load_english_dictionary)

    class Config(AgentConfig):
        max_edit_distance: int = Field(2, ge=1, le=MAX_DISTANCE, description="Largest edit distance corrected.")
        min_word_length: int = Field(4, ge=2, le=20, description="Shorter words are never corrected.")
        short_word_max_distance: int = Field(
            1, ge=1, le=MAX_DISTANCE, description="Edit distance allowed for words of up to 5 letters."
        )
        use_collection_vocabulary: bool = Field(True, description="Treat the collection's own words as correct.")
        vocabulary_min_count: int = Field(
            1, ge=1, description="A collection word counts as known when it occurs at least this often."
        )
        keep: list[str] = Field(default_factory=list, description="Words never corrected (case-insensitive).")
        languages: list[str] = Field(
            ["en"], min_length=1,
            description="Query languages (ISO 639-1, from language_detector or translator) the checker runs on.",
        )

    config: Config

    def warm_up(self) -> None:
        self.english.get()

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        language = inp.metadata.get("translated_to") or inp.metadata.get("language")
        known = [code.lower() for code in self.config.languages]
        if isinstance(language, str) and language and language.lower() not in known:
            raise AgentSkipped(f"query language {language!r} is not one the spell checker has a dictionary for {known}")
        english = self.english.get()
        domain_of, domain_words = self._domain(inp, ctx)
        keep = {w.lower() for w in self.config.keep}
        corrections: dict[str, str] = {}

        def fix_word(match: re.Match[str]) -> str:
            word = match.group(0)
            lower = word.lower()
            if (len(word) < self.config.min_word_length or lower in keep or lower in domain_words
                    or (len(word) > 1 and word.isupper()) or lower in english.words):
                return word
            limit = self.config.max_edit_distance if len(word) > 5 else min(
                self.config.max_edit_distance, self.config.short_word_max_distance)
            best = self._best(lower, limit, english, domain_of() if domain_of is not None else None)
            if best is None or best == lower:
                return word
            fixed = _match_case(word, best)
            corrections[word] = fixed
            return fixed

        def fix_token(match: re.Match[str]) -> str:
            token = match.group(0)
            if any(c.isdigit() for c in token):  # "Q4", "2025", "3.5GW", "H2O": left as written
                return token
            return _WORD.sub(fix_word, token)

        query = _TOKEN.sub(fix_token, inp.query)
        return PreSearchOutput(
            query=query,
            metadata={"corrections": corrections, "spelling_vocabulary_words": len(domain_words)},
        )

    def _domain(self, inp: PreSearchInput, ctx: AgentContext) -> tuple[Callable[[], SymSpell] | None, frozenset[str]]:
        """The collection's words, and the dictionary made of them, built only when a word needs a correction:
        most queries need none, and building one takes seconds (2.8 s for SciFact's 18,000 words, 2 cores)."""
        collection_id = inp.collection_id or ctx.collection_id
        if not (self.config.use_collection_vocabulary and ctx.tools is not None and collection_id):
            return None, frozenset()
        raw = ctx.tools.vocabulary(collection_id)
        vocabulary, fingerprint, known = _known_words(raw, self.config.vocabulary_min_count)
        if not vocabulary:
            return None, frozenset()
        key = (collection_id, ctx.collection_epoch, fingerprint)
        return (lambda: domain_dictionary(key, vocabulary)), known

    @staticmethod
    def _best(word: str, limit: int, english: SymSpell, domain: SymSpell | None) -> str | None:
        """The closest known word; at equal distance a collection word wins, then the more frequent one."""
        candidates: list[tuple[int, int, int, str]] = []
        for rank, sym in ((0, domain), (1, english)):
            if sym is None:
                continue
            for item in sym.lookup(word, Verbosity.CLOSEST, max_edit_distance=limit, transfer_casing=False):
                candidates.append((item.distance, rank, -item.count, item.term))
        return min(candidates)[3] if candidates else None
