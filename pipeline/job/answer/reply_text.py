"""The answer's text out of a reply that is still arriving: what can be shown before the model has finished.

The model is asked for ``{"answer": "...", "steps": [...]}``. ``ReplyTextFilter`` is fed the raw pieces as they
arrive and gives back the pieces of the ``answer`` string's *decoded* text (escapes such as ``\\n``, ``\\"`` and
``\\u00e9`` resolved, even when split between pieces), and nothing of the JSON around it. A reply that does not
open with ``{`` (or a code fence) is prose: its pieces pass through as they come. What is shown is a preview: the
answer kept is still the one parsed and checked on the whole reply (``pipeline.job.answer.llm``).

Usage::

    text = ReplyTextFilter()
    text.feed('{"answer": "Paris')     # "Paris"
    text.feed(' [1]\\u00e9", "steps"')  # " [1]é"
"""

from __future__ import annotations

import json
import re

_KEY = re.compile(r'(?<!\\)"answer"\s*:\s*"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class ReplyTextFilter:
    def __init__(self) -> None:
        self.mode: str | None = None  # None (undecided) | "json" | "text"
        self._head = ""  # the raw reply until the answer's string opens
        self._pending = ""  # an escape split between pieces
        self._state = "before"  # before | inside | after

    def feed(self, piece: str) -> str:
        """The answer text that ``piece`` adds (may be empty)."""
        if self.mode == "text":
            return piece
        if self.mode is None:
            self._head += piece
            lead = self._head.lstrip()
            if not lead:
                return ""
            if lead[0] == "{" or lead.startswith("```"):
                self.mode = "json"
            elif "```".startswith(lead):
                return ""  # maybe a fence: wait for more
            else:
                self.mode = "text"
                head, self._head = self._head.lstrip(), ""
                return head
            piece, self._head = self._head, ""
        return self._json(piece)

    def _json(self, piece: str) -> str:
        if self._state == "after":
            return ""
        if self._state == "before":
            self._head += piece
            found = _KEY.search(self._head)
            if not found:
                return ""
            self._state = "inside"
            piece, self._head = self._head[found.end():], ""
        return self._decode(piece)

    def _decode(self, piece: str) -> str:
        raw = self._pending + piece
        self._pending = ""
        out: list[str] = []
        i = 0
        while i < len(raw):
            char = raw[i]
            if char == '"':
                self._state = "after"
                break
            if char != "\\":
                out.append(char)
                i += 1
                continue
            if i + 1 >= len(raw):
                self._pending = raw[i:]
                break
            code = raw[i + 1]
            if code == "u":
                if i + 6 > len(raw):
                    self._pending = raw[i:]
                    break
                unit = raw[i:i + 6]
                # A surrogate pair is decoded together: its first half waits for the second.
                if _high_surrogate(unit[2:]):
                    if i + 12 > len(raw):
                        self._pending = raw[i:]
                        break
                    unit = raw[i:i + 12]
                try:
                    out.append(json.loads(f'"{unit}"'))
                except json.JSONDecodeError:
                    out.append(unit)
                i += len(unit)
                continue
            out.append(_ESCAPES.get(code, code))
            i += 2
        return "".join(out)


def _high_surrogate(digits: str) -> bool:
    try:
        return 0xD800 <= int(digits, 16) <= 0xDBFF
    except ValueError:
        return False
