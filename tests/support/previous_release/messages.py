"""The previous release's captured fixtures, read back: its task messages taken apart into every call they lead to.

A job's first message carries its whole canvas: the chain still to run, the chords in it, the errback. Each
signature in it becomes a call of a task, with what Celery passes in front of the signature's own arguments: the
parent's result for a step of a chain, a chord's header or body (``leading=1``), ``(request, exc, traceback)``
for an errback (``leading=3``), nothing for the message's own task or an immutable signature.

Usage::

    for call in calls(load("job_messages.json")["single"]):
        inspect.signature(app.tasks[call.task].run).bind(*[None] * call.leading, *call.args, **call.kwargs)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The last release that shipped, whose code ``capture.py`` ran to write the fixtures, and its schema's head.
PREVIOUS_RELEASE = "77f5e0a"
PREVIOUS_HEAD = "0011_document_files"
ERRBACK_ARGS = 3


@dataclass(frozen=True)
class Call:
    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    leading: int


def load(name: str) -> Any:
    return json.loads((HERE / name).read_text())


def calls(message: dict[str, Any]) -> Iterator[Call]:
    """Every task call a captured message leads to: its own, then those of its canvas."""
    args, kwargs, embed = message["body"]
    yield Call(message["headers"]["task"], args, kwargs, 0)
    for sig in embed.get("chain") or []:
        yield from _signature(sig, 1)
    for sig in embed.get("callbacks") or []:
        yield from _signature(sig, 1)
    for sig in embed.get("errbacks") or []:
        yield from _signature(sig, ERRBACK_ARGS)
    if embed.get("chord"):
        yield from _signature(embed["chord"], 1)


def _signature(sig: dict[str, Any], leading: int) -> Iterator[Call]:
    kwargs, options = sig.get("kwargs") or {}, sig.get("options") or {}
    leading = 0 if sig.get("immutable") else leading
    if sig["task"] == "celery.chord":
        yield from _signature(kwargs["header"], leading)
        yield from _signature(kwargs["body"], 1)
    elif sig["task"] in ("celery.group", "celery.chain"):
        for n, task in enumerate(kwargs["tasks"]):
            yield from _signature(task, leading if sig["task"] == "celery.group" or n == 0 else 1)
    else:
        yield Call(sig["task"], list(sig.get("args") or []), kwargs, leading)
    for link in options.get("link") or []:
        yield from _signature(link, 1)
    for link in options.get("link_error") or []:
        yield from _signature(link, ERRBACK_ARGS)
