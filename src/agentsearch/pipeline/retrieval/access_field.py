"""A chunk's document groups as a plain Milvus field, so a group-restricted search does not parse every row's JSON.

A restricted document's chunks carry its group tokens (``"<team id>:<group>"``) in the metadata key
``ACCESS_KEY``; collections made since this field existed also carry them in ``ACCESS_FIELD``, a VARCHAR written
from the same key at every upsert (a document whose groups change is indexed again, so the field follows). The
field holds each token as a fixed-width digest between bars (``"|3f9a...|77c0...|"``), and ``""`` for a document
every member finds.

Why a digest between bars: Milvus Lite (3.x) evaluates a clause on a JSON key row by row in Python (a
``json.loads`` per row, 150x a search without a filter at 20,000 rows), an ``ARRAY`` field's ``array_contains_any``
the same way, while ``==`` and ``like`` on a VARCHAR run vectorised over the whole column (pyarrow). ``like``
matches ``%`` and ``_`` as wildcards and group names may hold ``_``: a digest is hex, so no token's pattern can match
another's, and bars keep one digest from matching inside another.

Usage::

    access_value(["5f0c:hr", "5f0c:legal"])       # '|1b4e...|9c2d...|'  (sorted, one digest per token)
    access_value([])                              # ''
    access_clause("in", ["5f0c:hr"])              # '(access_groups like "%|1b4e...|%")'
    access_clause("exists", None)                 # 'access_groups != ""'
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

ACCESS_KEY = "_access_groups"  # the metadata key of a restricted document's tokens
ACCESS_FIELD = "access_groups"
# 20 groups a document at most (security.document_access); each digest and its bar take 33 characters.
ACCESS_FIELD_CHARS = 4096
_DIGEST_BYTES = 16


def token_digest(token: str) -> str:
    """One token as the field stores it: 32 hex characters."""
    return hashlib.blake2b(token.encode(), digest_size=_DIGEST_BYTES).hexdigest()


def access_value(tokens: Any) -> str:
    """The field's value for a chunk whose metadata holds ``tokens`` under ``ACCESS_KEY`` (anything else, or
    nothing, is a chunk of an unrestricted document: ``""``)."""
    if not isinstance(tokens, list | tuple):
        return ""
    digests = sorted({token_digest(t) for t in tokens if isinstance(t, str)})
    return "|" + "|".join(digests) + "|" if digests else ""


def access_clause(op: str, values: Iterable[Any] | None) -> str | None:
    """The clause on ``ACCESS_FIELD`` meaning the same as ``op`` on the metadata key: ``exists`` (a restricted
    chunk), ``in`` (a chunk holding one of ``values``). None for any other operator (``eq`` on a key holding a
    list is false in Milvus, which a field of digests cannot say), or a value that is not a string: that clause
    reads the JSON key as before."""
    if op == "exists":
        return f'{ACCESS_FIELD} != ""'
    if op != "in":
        return None
    values = list(values or [])
    if not values or not all(isinstance(v, str) for v in values):
        return None
    # Digests are hex: nothing in the pattern is a wildcard or needs escaping.
    patterns = sorted({token_digest(v) for v in values})
    return "(" + " or ".join(f'{ACCESS_FIELD} like "%|{d}|%"' for d in patterns) + ")"
