"""What a value must be for the service to keep it: text without NUL characters or lone UTF-16 surrogates, numbers
that are finite.

JSON lets a client send all three (``"\\u0000"``, ``"\\ud800"``, and Python's parser takes ``NaN``, ``Infinity``
and ``1e999``), pydantic lets them through, and only the database, a UTF-8 encoder or the search maths fails on
them later, as a 500 or a failed job. They are refused where input enters instead: the API's JSON bodies and the
JSON Lines files the command line reads, with the path of each offending value.

Usage::

    list(problems({"query": "ok", "search": {"recency_half_life_days": float("inf")}}))
    # [(("search", "recency_half_life_days"), "must be a finite number")]
    loads_checked('{"a": NaN}')     # raises NotStorable with the same kind of list
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

Path = tuple[str | int, ...]

# An error list this long already tells the client what is wrong; a body of a million bad values need not be
# walked to the end to say so.
MAX_PROBLEMS = 20


class NotStorable(ValueError):
    def __init__(self, found: list[tuple[Path, str]]) -> None:
        self.problems = found
        super().__init__("; ".join(f"{'.'.join(map(str, path)) or 'value'}: {message}" for path, message in found))


def text_problem(text: str) -> str | None:
    if text.isascii():
        return "must not contain NUL characters" if "\x00" in text else None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain lone UTF-16 surrogates (invalid Unicode)"
    return "must not contain NUL characters" if "\x00" in text else None


def problems(value: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    """Each value under ``value`` the service could not keep, with its path and why (at most MAX_PROBLEMS)."""
    found = 0
    stack: list[tuple[Path, Any]] = [(path, value)]
    while stack and found < MAX_PROBLEMS:
        where, item = stack.pop()
        message = None
        if isinstance(item, str):
            message = text_problem(item)
        elif isinstance(item, float):
            message = None if math.isfinite(item) else "must be a finite number"
        elif isinstance(item, dict):
            children = []
            for position, (key, child) in enumerate(item.items()):
                if isinstance(key, str) and (key_problem := text_problem(key)):
                    # The key cannot be echoed safely; its position among the keys names it.
                    found += 1
                    yield (*where, f"<key {position}>"), f"key {key_problem}"
                    continue
                children.append(((*where, key), child))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(((*where, i), child) for i, child in reversed(list(enumerate(item))))
        if message:
            found += 1
            yield where, message


def loads_checked(text: str | bytes, path: Path = ()) -> Any:
    """``json.loads`` that refuses what ``problems`` finds (NotStorable), the paths prefixed with ``path``."""
    # Python's parser reads NaN and Infinity literals, and 1e999 as inf: the walk finds all three.
    value = json.loads(text)
    found = list(problems(value, path))
    if found:
        raise NotStorable(found)
    return value
