"""What a value must be for the service to keep it: text without NUL characters or lone UTF-16 surrogates, numbers
that are finite, arrays and objects nested at most ``MAX_DEPTH`` deep.

JSON lets a client send all three (``"\\u0000"``, ``"\\ud800"``, and Python's parser takes ``NaN``, ``Infinity``
and ``1e999``), pydantic lets them through, and only the database, a UTF-8 encoder or the search maths fails on
them later, as a 500 or a failed job. They are refused where input enters instead: the API's JSON bodies and the
JSON Lines files the command line reads, with the path of each offending value.

Nesting is bounded for the same reason: JSON sets no limit, and every recursive step after the parse (Python's own
parser, pydantic, ``json.dumps`` in the worker, the agents that walk metadata) fails with a RecursionError somewhere
below a thousand levels. The walk here is a loop, so it measures any depth; a value past the limit is named by the
first steps of its path only (a path as deep as the nesting would be a copy of what was sent).

Usage::

    list(problems({"query": "ok", "search": {"recency_half_life_days": float("inf")}}))
    # [(("search", "recency_half_life_days"), "must be a finite number")]
    loads_checked('{"a": NaN}')     # raises NotStorable with the same kind of list
    loads_checked("[" * 100 + "]" * 100, ("body",))   # NotStorable: [(("body",), "nests deeper than 64 ...")]
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
# Arrays and objects inside one another, the outermost counting 1. A request's own schemas need under 20 (a filter
# at its own limit of 8 nodes is 18 deep in its body); metadata gets the rest.
MAX_DEPTH = 64
# How much of a too-deep value's path names it.
DEPTH_PATH_STEPS = 3
DEPTH_MESSAGE = f"nests deeper than {MAX_DEPTH} levels of arrays and objects"


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


def _depth_path(path: Path, where: Path) -> Path:
    """The path a too-deep value is named by: ``path`` and the first steps below it, up to the last named field
    among them (a bare list of lists is named by ``path`` itself)."""
    shown = list(where[len(path):len(path) + DEPTH_PATH_STEPS])
    while shown and isinstance(shown[-1], int):
        shown.pop()
    return (*path, *shown)


def problems(value: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    """Each value under ``value`` the service could not keep, with its path and why (at most MAX_PROBLEMS)."""
    found = 0
    too_deep: set[Path] = set()
    stack: list[tuple[Path, Any, int]] = [(path, value, 1)]
    while stack and found < MAX_PROBLEMS:
        where, item, depth = stack.pop()
        message = None
        if isinstance(item, (dict, list)) and depth > MAX_DEPTH:
            # Not walked further: one problem per field named, however many deep branches it holds.
            where = _depth_path(path, where)
            if where not in too_deep:
                too_deep.add(where)
                message = DEPTH_MESSAGE
        elif isinstance(item, str):
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
                children.append(((*where, key), child, depth + 1))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(((*where, i), child, depth + 1) for i, child in reversed(list(enumerate(item))))
        if message:
            found += 1
            yield where, message


def deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether arrays and objects in ``value`` nest deeper than ``limit`` (the outermost counting 1), for JSON
    that comes from elsewhere than a request (an endpoint's reply); walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in item)
    return False


def loads_checked(text: str | bytes, path: Path = ()) -> Any:
    """``json.loads`` that refuses what ``problems`` finds (NotStorable), the paths prefixed with ``path``."""
    # Python's parser reads NaN and Infinity literals, and 1e999 as inf: the walk finds all three.
    try:
        value = json.loads(text)
    except RecursionError:
        # The parser recurses per level and gives up some way below a thousand: far past MAX_DEPTH either way.
        raise NotStorable([(path, DEPTH_MESSAGE)]) from None
    found = list(problems(value, path))
    if found:
        raise NotStorable(found)
    return value
