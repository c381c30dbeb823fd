"""src/agentsearch/pipeline/text/spelling_index.py: the compact SymSpell answers every lookup as symspellpy's own does.

Both are built from the same words (the first 4,000 of symspellpy's English list, and a small vocabulary added word
by word); every delete maps to the same words in the same order, and misspellings made at random (seeded) get the
same suggestions at each verbosity and edit distance.
"""

from __future__ import annotations

import importlib.resources
import random

import pytest
from symspellpy import SymSpell, Verbosity

from agentsearch.pipeline.text.spelling_index import CompactSymSpell, has_delete

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _english_words(n: int) -> list[tuple[str, int]]:
    path = importlib.resources.files("symspellpy") / "frequency_dictionary_en_82_765.txt"
    lines = path.read_text(encoding="utf-8").splitlines()[:n]
    return [(word, int(count)) for word, count in (line.split() for line in lines)]


def _both(words: list[tuple[str, int]], distance: int = 2, prefix: int = 7) -> tuple[SymSpell, CompactSymSpell]:
    plain, compact = SymSpell(distance, prefix), CompactSymSpell(distance, prefix)
    for word, count in words:
        plain.create_dictionary_entry(word, count)
        compact.create_dictionary_entry(word, count)
    return plain, compact.freeze()


def _misspelt(word: str, rng: random.Random) -> str:
    letters = list(word)
    for _ in range(rng.randint(1, 3)):
        at, edit = rng.randrange(len(letters) + 1), rng.choice("dir")
        if edit == "d" and letters:
            del letters[min(at, len(letters) - 1)]
        elif edit == "i":
            letters.insert(at, rng.choice(LETTERS))
        elif letters:
            letters[min(at, len(letters) - 1)] = rng.choice(LETTERS)
    return "".join(letters)


@pytest.fixture(scope="module")
def english() -> tuple[SymSpell, CompactSymSpell, list[str]]:
    words = _english_words(4000)
    plain, compact = _both(words)
    return plain, compact, [word for word, _ in words]


def test_every_delete_maps_to_the_same_words_in_the_same_order(english):
    plain, compact, _ = english
    assert plain.words == compact.words
    for delete, words in plain._deletes.items():
        assert compact._deletes[delete] == tuple(words), delete
    assert "zzzzqq" not in compact._deletes and compact._deletes["zzzzqq"] == ()


@pytest.mark.parametrize("verbosity", [Verbosity.TOP, Verbosity.CLOSEST, Verbosity.ALL])
@pytest.mark.parametrize("distance", [1, 2])
def test_lookups_answer_as_symspellpy(english, verbosity, distance):
    plain, compact, words = english
    rng = random.Random(f"{verbosity}-{distance}")
    for word in rng.sample(words, 400):
        query = _misspelt(word, rng)

        def suggestions(sym: SymSpell, query: str = query) -> list[tuple[str, int, int]]:
            found = sym.lookup(query, verbosity, max_edit_distance=distance, transfer_casing=False)
            return [(item.term, item.distance, item.count) for item in found]

        assert suggestions(compact) == suggestions(plain), query


def test_a_vocabulary_added_word_by_word():
    vocabulary = [("northwind", 40), ("electrolyser", 12), ("revenue", 9), ("ppa", 3), ("grid", 30), ("ab", 2)]
    plain, compact = _both(vocabulary)
    for query in ("nortwind", "electroliser", "reveune", "pa", "gird", "a", "b", "xyz"):
        for verbosity in (Verbosity.CLOSEST, Verbosity.ALL):
            expected = [(i.term, i.distance, i.count) for i in plain.lookup(query, verbosity, transfer_casing=False)]
            got = [(i.term, i.distance, i.count) for i in compact.lookup(query, verbosity, transfer_casing=False)]
            assert got == expected, query


def test_has_delete_is_symspells_own_rule():
    sym = SymSpell(2, 7)
    for word in ("a", "ab", "abc", "revenue", "electrolyser", "aab"):
        deletes = sym._edits_prefix(word)
        candidates = {word[:7][i:j] for i in range(8) for j in range(i, 8)} | deletes | {"", "zz", "rvnu"}
        for candidate in candidates:
            assert has_delete(word, candidate, 7, 2) == (candidate in deletes), (word, candidate)


def test_looked_up_only_once_frozen():
    sym = CompactSymSpell(2, 7)
    sym.create_dictionary_entry("revenue", 3)
    with pytest.raises(RuntimeError):
        sym.lookup("reveune", Verbosity.CLOSEST)
    assert sym.freeze().lookup("reveune", Verbosity.CLOSEST)[0].term == "revenue"
