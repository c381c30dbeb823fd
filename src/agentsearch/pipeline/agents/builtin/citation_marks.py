"""Where a response agent marks the answer's sentences that their sources do not (fully) support.

The answer step checks each cited sentence against its sources (``ResponseAgentInput.citations``). A sentence
is marked by its best verdict over the sources it cites: ``unsupported`` when none supports any of it,
``partial`` when one supports part of it and none all of it; a supported sentence is not marked. The PDF report and
the email draft print the mark as words beside the sentence ("not supported by source 2"), so it survives
copying the text out, and colour it. A sentence an LLM wrote that was delivered as only partly supported already
carries the words ``PARTIAL_MARK`` (``agentsearch.pipeline.text``) in the answer, put there by
``agentsearch.pipeline.job.answer.grounding``: ``shown`` drops them where the mark's own, more specific words follow.

Under the citation check's line, ``model_note`` says how an LLM's answer was made (``metadata.answer``): how many
of the model's sentences the sources support and how many were left out, or why the model's answer was not used.

Usage::

    for text, mark in marked_pieces(answer, citations):
        mark        # None, or Mark(status="unsupported", sources=[2], reason="...")
        shown(text, mark)    # the sentence as printed beside the mark's words
    summary(citations)   # "Citation check: 2 of 3 cited sentences supported, 1 not supported."
    model_note(metadata.get("answer"))   # "Written by the model (m): 2 of 3 sentences supported ...; 1 left out."
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentsearch.pipeline.documents import Citation
from agentsearch.pipeline.text import PARTIAL_MARK
from agentsearch.pipeline.text.spans import find_loose

_RANK = {"supported": 2, "partial": 1, "unsupported": 0}
_PARTIAL = re.compile(r"\s*" + re.escape(PARTIAL_MARK))


@dataclass(frozen=True)
class Mark:
    status: str  # partial | unsupported
    sources: tuple[int, ...]
    reason: str | None = None

    @property
    def label(self) -> str:
        cited = ", ".join(str(n) for n in self.sources)
        plural = "s" if len(self.sources) > 1 else ""
        if self.status == "unsupported":
            return f"not supported by source{plural} {cited}"
        return f"only partly supported by source{plural} {cited}"


def sentence_verdicts(citations: list[Citation]) -> dict[str, Mark | None]:
    """Each cited sentence (as written) with its mark, None when a source supports it."""
    best: dict[str, list[Citation]] = {}
    for c in citations:
        best.setdefault(c.sentence, []).append(c)
    out: dict[str, Mark | None] = {}
    for sentence, checks in best.items():
        top = max(checks, key=lambda c: _RANK[c.status])
        if top.status == "supported":
            out[sentence] = None
        else:
            out[sentence] = Mark(top.status, tuple(c.source for c in checks), top.reason)
    return out


def marked_pieces(text: str, citations: list[Citation]) -> list[tuple[str, Mark | None]]:
    """``text`` cut into pieces that join back to it: the marked sentences each a piece with its mark."""
    found: list[tuple[int, int, Mark]] = []
    cursor = 0
    for sentence, mark in sentence_verdicts(citations).items():
        span = find_loose(text, sentence, cursor) or find_loose(text, sentence)
        if span is None:
            continue
        if mark is not None and not any(s < span[1] and span[0] < e for s, e, _ in found):
            found.append((*span, mark))
        cursor = span[1]
    pieces: list[tuple[str, Mark | None]] = []
    at = 0
    for start, end, mark in sorted(found, key=lambda f: f[0]):
        if start > at:
            pieces.append((text[at:start], None))
        pieces.append((text[start:end], mark))
        at = end
    if at < len(text):
        pieces.append((text[at:], None))
    return pieces


def shown(piece: str, mark: Mark | None) -> str:
    """A piece of ``marked_pieces`` as printed: a marked sentence without the answer's own ``PARTIAL_MARK``, since
    the mark's words after it say the same of it, naming the sources."""
    return piece if mark is None else _PARTIAL.sub("", piece)


def summary(citations: list[Citation]) -> str | None:
    """One line on the check, or None when the answer cites nothing."""
    verdicts = sentence_verdicts(citations)
    if not verdicts:
        return None
    supported = sum(m is None for m in verdicts.values())
    partial = sum(m is not None and m.status == "partial" for m in verdicts.values())
    unsupported = len(verdicts) - supported - partial
    line = f"Citation check: {supported} of {len(verdicts)} cited sentences supported by their sources"
    extra = [f"{partial} only partly supported" if partial else "", f"{unsupported} not supported" if unsupported
             else ""]
    extra = [e for e in extra if e]
    return line + (f"; {', '.join(extra)} (marked)." if extra else ".")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def model_note(answer: Mapping[str, Any] | None) -> str | None:
    """One line on how an LLM's answer was made, from a job's ``metadata.answer``; None when no model wrote one (none
    configured, or no documents to answer from). The console's answer view says the same (``jobview.js``)."""
    if not isinstance(answer, Mapping):
        return None
    sentences = answer.get("sentences")
    sentences = [s for s in sentences if isinstance(s, Mapping)] if isinstance(sentences, list) else None
    if answer.get("method") != "llm":
        if sentences is None and not answer.get("degraded"):
            return None
        reason = str(answer.get("fallback_reason") or "the offline answer was delivered instead").rstrip(". ")
        return f"The model's answer was not used: {reason}."
    if sentences is None:
        return None
    draft = answer.get("draft")
    model = answer.get("model") or (draft.get("model") if isinstance(draft, Mapping) else None)
    supported = sum(s.get("status") == "supported" for s in sentences)
    partial = sum(s.get("status") == "partial" for s in sentences)
    left_out = sum(not s.get("delivered") for s in sentences)
    who = f"Written by the model ({model})" if model else "Written by the model"
    line = f"{who}: {supported} of {_plural(len(sentences), 'sentence')} supported by the sources"
    if partial:
        line += f", {partial} only partly"
    if left_out:
        line += f"; {left_out} left out"
    quotes = answer.get("quotes_added")
    if isinstance(quotes, int) and quotes > 0:
        line += f"; {_plural(quotes, 'quote')} from the sources added"
    return line + "."
