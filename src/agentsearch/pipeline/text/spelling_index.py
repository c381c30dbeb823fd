"""A SymSpell dictionary whose delete index is one sorted array, not a dict of lists: the same lookups, a fifth of the
memory.

SymSpell finds a misspelt word's corrections through every string a dictionary word becomes with up to
``max_dictionary_edit_distance`` letters deleted from its first ``prefix_length``; symspellpy keeps them as a dict
from each such string to the list of words it came from. For its bundled English list that is 676,094 strings and
as many lists: 135 MiB of a worker's memory, the largest single item of a thread-pool worker (BENCHMARKS.md, "the
thread-pool worker's memory"). ``CompactSymSpell`` keeps the same map as one sorted array of the strings' hashes, each
with the number of a word it came from (16 MiB), built while the words are added, so the dict never exists.

A delete's words are those of its hash that do become it (a hash shared by two strings costs a check, never a wrong
word), in the order they were added: ``lookup`` answers exactly as ``SymSpell``'s, which it is.

Usage::

    sym = CompactSymSpell(max_dictionary_edit_distance=2, prefix_length=7)
    sym.load_dictionary(path, term_index=0, count_index=1)      # or create_dictionary_entry(word, count) ...
    sym.freeze()                                                # ... then freeze: the index is built once
    sym.lookup("reveune", Verbosity.CLOSEST)                    # [SuggestItem("revenue", 2, ...)]
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
from symspellpy import SymSpell

INT64_MAX = (1 << 63) - 1


def has_delete(word: str, delete: str, prefix_length: int, max_distance: int) -> bool:
    """Whether SymSpell's deletes of ``word`` hold ``delete``: a subsequence of the word's first ``prefix_length``
    letters, at most ``max_distance`` shorter (the empty string only for a word of at most that many letters)."""
    prefix = word[:prefix_length]
    if len(delete) > len(prefix) or len(prefix) - len(delete) > max_distance:
        return False
    letters = iter(prefix)
    return all(letter in letters for letter in delete)


class DeletesIndex:
    """The words each delete came from, read as symspellpy reads its dict: ``delete in index``, ``index[delete]``.

    One sorted array of 64-bit keys: a delete's hash in the high bits, the number of a word it came from in the low
    ``id_bits``. A delete's words are the keys of its hash's high bits, in the order of their numbers (the order
    the words were added)."""

    def __init__(self, words: list[str], keys: np.ndarray, id_bits: int, prefix_length: int,
                 max_distance: int) -> None:
        self._words, self._keys, self._id_bits = words, keys, id_bits
        self._prefix_length, self._max_distance = prefix_length, max_distance

    def __getitem__(self, delete: str) -> tuple[str, ...]:
        low = (hash(delete) >> self._id_bits) << self._id_bits
        start = int(self._keys.searchsorted(low, "left"))
        high = low + (1 << self._id_bits)
        end = int(self._keys.searchsorted(high, "left")) if high <= INT64_MAX else len(self._keys)
        found: list[str] = []
        last = -1
        for key in self._keys[start:end].tolist():
            word_id = key & ((1 << self._id_bits) - 1)
            # Two deletes of one word may share the hash's bits (then it is listed twice), or another string may.
            if word_id != last and has_delete(self._words[word_id], delete, self._prefix_length, self._max_distance):
                found.append(self._words[word_id])
            last = word_id
        return tuple(found)

    def __contains__(self, delete: object) -> bool:
        return isinstance(delete, str) and bool(self[delete])

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def nbytes(self) -> int:
        return self._keys.nbytes


class _Builder:
    """What ``SymSpell.create_dictionary_entry`` appends to (``self._deletes[delete].append(word)``) while the words
    are added: each delete's hash and the word's number, in two growing arrays."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.hashes = array("q")
        self.word_ids = array("i")

    def __getitem__(self, delete: str) -> _Builder._Entry:
        return _Builder._Entry(self, hash(delete))

    def __contains__(self, delete: object) -> bool:
        raise RuntimeError("CompactSymSpell is looked up after freeze()")

    class _Entry:
        __slots__ = ("builder", "hash")

        def __init__(self, builder: _Builder, h: int) -> None:
            self.builder, self.hash = builder, h

        def append(self, word: str) -> None:
            words = self.builder.words
            # A word's deletes are all added together, right after the word itself.
            if not words or words[-1] is not word:
                words.append(word)
            self.builder.hashes.append(self.hash)
            self.builder.word_ids.append(len(words) - 1)

    def index(self, prefix_length: int, max_distance: int) -> DeletesIndex:
        # Sorted in place, one array beside the two being read: the index's peak is about twice its size.
        id_bits = max(1, (len(self.words) - 1).bit_length())
        keys = np.frombuffer(self.hashes, dtype=np.int64).copy()
        keys >>= id_bits
        keys <<= id_bits
        keys |= np.frombuffer(self.word_ids, dtype=np.int32)
        keys.sort()
        return DeletesIndex(self.words, keys, id_bits, prefix_length, max_distance)


class CompactSymSpell(SymSpell):
    """symspellpy's ``SymSpell`` with its delete index in arrays; words are added as to a ``SymSpell``, then
    ``freeze()`` builds the index, after which it is looked up (and no word added)."""

    def __init__(self, max_dictionary_edit_distance: int = 2, prefix_length: int = 7, count_threshold: int = 1,
                 **kwargs: Any) -> None:
        super().__init__(max_dictionary_edit_distance, prefix_length, count_threshold, **kwargs)
        self._deletes: Any = _Builder()

    def freeze(self) -> CompactSymSpell:
        if isinstance(self._deletes, _Builder):
            self._deletes = self._deletes.index(self._prefix_length, self._max_dictionary_edit_distance)
        return self
