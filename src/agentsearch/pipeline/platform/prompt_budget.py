"""Prompt budgets in tokens: the variable texts of a prompt (sources, documents, history) cut to what the model's
context holds beside the fixed part and the reply.

A request holds its prompt and its reply in the model's context (``LLMClient.context_tokens()``; a llama.cpp slot
can be 512 tokens, a hosted model 128k). A prompt past it is refused (a 400) or silently truncated by the server, so
every prompt that carries documents or long text is fitted first: the texts may use
``context - reply_tokens - margin_tokens - tokens(fixed)``. When the context is unknown the client's
``default_context_tokens`` (``AGENTSEARCH_LLM_DEFAULT_CONTEXT_TOKENS``, 4096) stands in.

The texts come in order of importance (the best-ranked source first, the most recent turn first). When they do not
fit, each gets an equal share of the room, a text shorter than its share leaving the rest to the others (so short
texts stay whole), and a longer one is cut at a word boundary to its share; when even ``min_tokens`` each would not
fit, the least important are left out, from the end (the first stays, cut, while ``MIN_FIRST_TOKENS`` fit). With
``share="in_order"`` the first texts stay whole instead and the one reaching the limit is cut (a conversation: the
latest turns whole, older ones out). The result is always a prefix of the texts: source ``[n]`` stays source ``[n]``.

Counting is cheap when nothing needs cutting: no byte-level tokenizer spends more than a token a byte, so a prompt
whose UTF-8 bytes fit is sent as it is without asking the endpoint; only one that may not fit is counted, by the
endpoint's tokenizer where it has one (``count_tokens``), else by ``estimate_tokens`` (on the high side).

Usage::

    fitted = fit_texts(llm, [system_message, {"role": "user", "content": f"Question: {q}"}],
                       [f"[{n}] {d.title}\\n{d.text}" for n, d in enumerate(documents, 1)], reply_tokens=512)
    fitted.texts       # what to put in the prompt (a prefix of the texts, some cut)
    fitted.fits        # False: the fixed part and the reply alone overflow the context (do not send it)
    fitted.note()      # "2 of 8 texts cut and 3 left out to fit a 2048-token context" (None when unchanged)
    texts = fit(llm, system_prompt, texts, reply_tokens=256)   # just the texts
    require_fit(llm, messages, reply_tokens=64)   # LLMError when a prompt with nothing to cut would overflow
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from agentsearch.pipeline.platform.llm import DEFAULT_CONTEXT_TOKENS, LLMError, estimate_tokens

# The chat template's own tokens: role markers around each message, a default system prompt some templates add.
MARGIN_TOKENS = 64
TOKENS_PER_MESSAGE = 8
MIN_TEXT_TOKENS = 48
MIN_FIRST_TOKENS = 16
_CUT_ROUNDS = 6

Fixed = str | Sequence[Mapping[str, str]]


class TokenCounter(Protocol):
    """What a budget needs of an LLM client (``agentsearch.pipeline.platform.llm.LLMClient``)."""

    def context_tokens(self) -> int | None: ...

    def count_tokens(self, text: str) -> int: ...


@dataclass(frozen=True)
class Fitted:
    """Texts fitted to a prompt budget: ``texts`` is a prefix of the given ones, ``cut`` of them shortened."""

    texts: list[str]
    cut: int
    dropped: int
    available_tokens: int
    context_tokens: int
    fits: bool

    @property
    def changed(self) -> bool:
        return bool(self.cut or self.dropped)

    def note(self) -> str | None:
        """What the budget did, for a job's metadata; ``None`` when every text went in whole."""
        if not self.fits:
            return f"the prompt and its reply do not fit the model's {self.context_tokens}-token context"
        if not self.changed:
            return None
        total = len(self.texts) + self.dropped
        parts = [f"{self.cut} of {total} texts cut"] if self.cut else []
        if self.dropped:
            parts.append(f"{self.dropped} left out")
        return f"{' and '.join(parts)} to fit a {self.context_tokens}-token context"


def context_of(llm: TokenCounter) -> int:
    """The context a prompt for ``llm`` must fit: what the client knows, else its default."""
    known = llm.context_tokens() if hasattr(llm, "context_tokens") else None
    default: int = getattr(llm, "default_context_tokens", DEFAULT_CONTEXT_TOKENS)
    return known or default


def _counter(llm: TokenCounter):
    return llm.count_tokens if hasattr(llm, "count_tokens") else estimate_tokens


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _fixed_text(fixed: Fixed) -> tuple[str, int]:
    """The fixed part's text and how many messages it is."""
    if isinstance(fixed, str):
        return fixed, 1
    return "\n".join(str(m.get("content") or "") for m in fixed), len(fixed)


def fit_texts(llm: TokenCounter, fixed: Fixed, texts: Sequence[str], reply_tokens: int, *,
              min_tokens: int = MIN_TEXT_TOKENS, margin_tokens: int = MARGIN_TOKENS,
              share: Literal["equal", "in_order"] = "equal") -> Fitted:
    """``texts`` fitted beside ``fixed`` (a string or the prompt's messages without the texts) and a reply of
    ``reply_tokens`` in ``llm``'s context; see the module's docstring for how. ``share="in_order"`` keeps the
    first texts whole instead, cutting the one that reaches the limit and leaving out the rest (a conversation's
    most recent turns)."""
    if reply_tokens < 0 or min_tokens < 1 or margin_tokens < 0:
        raise ValueError("reply_tokens and margin_tokens must not be negative, min_tokens must be positive")
    if share not in ("equal", "in_order"):
        raise ValueError(f"share must be 'equal' or 'in_order', not {share!r}")
    texts = list(texts)
    context = context_of(llm)
    fixed_text, messages = _fixed_text(fixed)
    room = context - reply_tokens - margin_tokens - TOKENS_PER_MESSAGE * messages
    # A byte-level tokenizer spends at most a token a byte: a prompt fitting in bytes needs no counting.
    fixed_bytes = _bytes(fixed_text)
    if fixed_bytes + sum(_bytes(t) for t in texts) <= room:
        return Fitted(texts, 0, 0, room - fixed_bytes, context, True)
    count = _counter(llm)
    available = room - count(fixed_text)
    if available < 0:
        return Fitted([], 0, len(texts), available, context, False)
    sizes = [count(t) for t in texts]
    if sum(sizes) <= available:
        return Fitted(texts, 0, 0, available, context, True)
    if share == "in_order":
        shares = _in_order(sizes, available, min_tokens)
    else:
        kept = len(texts)
        while kept > 1 and sum(min(s, min_tokens) for s in sizes[:kept]) > available:
            kept -= 1
        shares = _water_fill(sizes[:kept], available)
    if len(shares) == 1 and shares[0] < min(sizes[0], MIN_FIRST_TOKENS):
        shares = []  # a few words of the most important text would mislead more than they tell
    kept = len(shares)
    out, cut = [], 0
    for text, size, allowed in zip(texts, sizes, shares):
        if size > allowed:
            text = cut_to_tokens(llm, text, allowed, size)
            cut += 1
        out.append(text)
    return Fitted(out, cut, len(texts) - kept, available, context, True)


def fit(llm: TokenCounter, fixed: Fixed, texts: Sequence[str], reply_tokens: int, *,
        min_tokens: int = MIN_TEXT_TOKENS, margin_tokens: int = MARGIN_TOKENS,
        share: Literal["equal", "in_order"] = "equal") -> list[str]:
    """Just the fitted texts of ``fit_texts`` (empty when not even the fixed part fits)."""
    return fit_texts(llm, fixed, texts, reply_tokens, min_tokens=min_tokens, margin_tokens=margin_tokens,
                     share=share).texts


def require_fit(llm: TokenCounter, messages: Fixed, reply_tokens: int) -> None:
    """Raise ``LLMError`` when ``messages`` and a reply of ``reply_tokens`` overflow ``llm``'s context: a prompt
    with nothing left to cut (a query, a configured template) that the endpoint would refuse or truncate."""
    fitted = fit_texts(llm, messages, [], reply_tokens)
    if not fitted.fits:
        raise LLMError(f"prompt not sent: {fitted.note()}")


def _in_order(sizes: list[int], available: int, min_tokens: int) -> list[int]:
    """Whole texts while they fit; the next one cut to what is left (if ``min_tokens`` are), the rest left out."""
    shares, left = [], available
    for size in sizes:
        if size <= left:
            shares.append(size)
            left -= size
            continue
        if left >= min_tokens or not shares:
            shares.append(left)
        break
    return shares


def _water_fill(sizes: list[int], available: int) -> list[int]:
    """Equal shares of ``available``; a text needing less than its share gives the rest to the others."""
    shares = [0] * len(sizes)
    left, todo = available, sorted(range(len(sizes)), key=lambda i: sizes[i])
    while todo:
        share = left // len(todo)
        i = todo[0]
        if sizes[i] <= share:
            shares[i] = sizes[i]
            left -= sizes[i]
            todo.pop(0)
            continue
        for j in todo:
            shares[j] = share
        break
    return shares


def cut_to_tokens(llm: TokenCounter, text: str, tokens: int, size: int | None = None) -> str:
    """``text`` cut at a word boundary to at most ``tokens`` tokens (by ``llm``'s count), marked with " …"."""
    count = _counter(llm)
    size = count(text) if size is None else size
    if size <= tokens:
        return text
    if tokens <= 1:
        return ""
    chars = len(text) * tokens // max(size, 1)
    for _ in range(_CUT_ROUNDS):
        piece = _at_word(text, chars)
        piece_size = count(piece + " …")
        if piece_size <= tokens:
            return piece + " …"
        chars = min(len(piece) - 1, int(len(piece) * tokens / piece_size * 0.95))
        if chars <= 0:
            break
    return ""


def _at_word(text: str, chars: int) -> str:
    head = text[:max(0, chars)]
    if chars < len(text) and not text[chars:chars + 1].isspace():
        trimmed = re.sub(r"\S+$", "", head)
        head = trimmed if trimmed.strip() else head
    return head.rstrip()
