"""A change held to a collection's quality: its search settings measured on the question set beside the current
ones, applied only if no figure falls by more than the collection's tolerance.

A collection's search settings (``collections.search_settings``: ``SearchConfig`` fields and ``top_k``) are what its
jobs search with when a request does not say (``agentsearch.pipeline.job.submit``). A staged change runs the set
twice, current settings then staged ones, within ``quality_gate_timeout_s`` together; the verdict is ``applied``,
``refused`` (a figure fell past the tolerance: both sets of figures and the falls are returned) or ``not_applied``
(the runs did not finish in time, or there is no set to run). Both runs are kept (``eval_runs``, kinds ``current``
and ``staged``).

Usage::

    wanted = checked_search_settings({"strategy": "keyword", "top_k": 3}, settings)
    decision = gate(services, collection_id, questions, run_settings(saved, settings),
                    run_settings(wanted, settings), tolerance=0.02, timeout_s=300)
    decision.verdict, decision.as_json()
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentsearch.pipeline.eval.quality_runs import HIGHER_IS_BETTER, LOWER_IS_BETTER, Asked, RunSettings, measure
from agentsearch.pipeline.refusal import invalid, invalid_fields
from agentsearch.pipeline.retrieval.config import SearchConfig

if TYPE_CHECKING:
    from agentsearch.pipeline.platform.settings import Settings
    from agentsearch.pipeline.services import Services

# What a collection's search settings may not hold: a filter belongs to a request (and to the document groups).
NOT_SETTABLE = ("filter",)


def checked_search_settings(given: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The search settings to store, checked as a search request's overrides are (422 naming the field)."""
    for name in NOT_SETTABLE:
        if name in given:
            raise invalid(("body", "search", name), f"{name} is set per request, not per collection")
    top_k = given.get("top_k", settings.default_top_k)
    if isinstance(top_k, int) and top_k > settings.max_top_k:
        raise invalid(("body", "search", "top_k"), f"top_k may be at most {settings.max_top_k}")
    try:
        SearchConfig(**{**settings.search_defaults(), **given})
    except ValidationError as exc:
        raise invalid_fields(("body", "search"), exc) from None
    except TypeError as exc:  # a field name that is no keyword at all
        raise invalid(("body", "search"), str(exc)) from None
    return dict(given)


def run_settings(search_settings: dict[str, Any] | None, settings: Settings) -> RunSettings:
    """What a collection's jobs search with, as a run measures it."""
    given = dict(search_settings or {})
    top_k = int(given.pop("top_k", settings.default_top_k))
    return RunSettings(given, top_k)


def falls(current: dict[str, Any], staged: dict[str, Any], tolerance: float) -> list[dict[str, Any]]:
    """Each figure that got worse by more than ``tolerance`` (absolute), with both values. A figure either side
    lacks (None: no LLM, no citations) is not compared."""
    out = []
    for name in (*HIGHER_IS_BETTER, *LOWER_IS_BETTER):
        before, after = current.get(name), staged.get(name)
        if before is None or after is None:
            continue
        fall = (before - after) if name in HIGHER_IS_BETTER else (after - before)
        if fall > tolerance + 1e-9:
            out.append({"figure": name, "current": before, "staged": after, "fall": round(fall, 4)})
    return out


@dataclass
class Decision:
    verdict: str  # applied | refused | not_applied
    reason: str
    tolerance: float
    current: dict[str, Any] = field(default_factory=dict)
    staged: dict[str, Any] = field(default_factory=dict)
    fell: list[dict[str, Any]] = field(default_factory=list)
    statuses: tuple[str, str] = ("", "")

    def as_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "tolerance": self.tolerance,
                "figures": {"current": self.current, "staged": self.staged}, "falls": self.fell}


def gate(services: Services, collection_id: str, questions: list[Asked], current: RunSettings,
         staged: RunSettings, tolerance: float, timeout_s: float, llm: Any = None) -> Decision:
    """Both runs and the verdict; never applies anything itself (the caller does, on ``applied``)."""
    if not questions:
        return Decision("not_applied", "the collection has no question set to run: generate one first", tolerance)
    deadline = time.monotonic() + timeout_s
    before, first = measure(services, collection_id, questions, current, llm=llm, deadline=deadline)
    after, second = (measure(services, collection_id, questions, staged, llm=llm, deadline=deadline)
                     if first == "done" else ({}, "timed_out"))
    if (first, second) != ("done", "done"):
        return Decision("not_applied", f"the staged run did not finish within {timeout_s:g} s "
                                       f"(quality_gate_timeout_s); nothing was changed", tolerance, before, after,
                        statuses=(first, second))
    fell = falls(before, after, tolerance)
    if fell:
        names = ", ".join(f"{f['figure']} {f['current']} -> {f['staged']}" for f in fell)
        return Decision("refused", f"quality falls past the tolerance {tolerance:g}: {names}", tolerance, before,
                        after, fell, (first, second))
    return Decision("applied", f"no figure fell by more than {tolerance:g}", tolerance, before, after,
                    statuses=(first, second))
