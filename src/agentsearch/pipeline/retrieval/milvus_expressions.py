"""A metadata filter as Milvus takes it (``agentsearch.pipeline.retrieval.filters`` compiles one): an expression
template with named parameters, and every value written as a literal of Milvus's expression grammar.

Usage::

    CompiledFilter('metadata["lang"] == {p0}', {"p0": "de"}).expression()   # 'metadata["lang"] == "de"'
    milvus_literal('say "hi"')                                             # '"say \\"hi\\""'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_PLACEHOLDER = re.compile(r"\{(p\d+)\}")
# The escapes Milvus's expression grammar knows (Milvus Lite's tokenizer knows these and no others).
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"}


@dataclass(frozen=True)
class CompiledFilter:
    """A filter as Milvus takes it: ``template`` with ``{pN}`` placeholders, and ``params`` by name."""

    template: str
    params: dict[str, Any]

    def expression(self) -> str:
        """The template with every parameter written as a Milvus literal."""
        return _PLACEHOLDER.sub(lambda m: milvus_literal(self.params[m.group(1)]), self.template)


def milvus_literal(value: Any) -> str:
    """A value as a literal of Milvus's expression grammar. Strings are double-quoted with backslash, quote, CR
    and LF escaped (the only characters that end or break a literal); every other character stands for itself."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("Milvus has no literal for a non-finite number")
        return repr(value)
    if isinstance(value, str):
        return '"' + "".join(_ESCAPES.get(ch, ch) for ch in value) + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(milvus_literal(v) for v in value) + "]"
    raise TypeError(f"no Milvus literal for {type(value).__name__}")
