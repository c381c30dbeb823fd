"""Artifact names: distinct for two configs of one response agent in a job, and the same whenever a step runs.

Artifacts are unique per (job, filename), a second save replacing the first (that is what makes a redelivered
response step harmless). Two configs of one agent (two ``executive_summary`` with different settings) make files
of the same name, so one of the two artifacts was lost. Each response step therefore gets a rank among the job's
steps of its agent, from the job's agent snapshot alone (priority, then config id): the first keeps its name, the
others are numbered, ``summary.txt``, ``summary-2.txt``. A step run again (a redelivered message, a job the reaper
enqueued again) has the same rank, so it still replaces its own artifact and never the other config's.

Usage::

    ranks = name_ranks(response_specs)             # {(agent_id, config_id, priority): 1, ...}
    rank = ranks[rank_key(spec)]
    numbered("summary.txt", 2)                     # "summary-2.txt"
"""

from __future__ import annotations

from collections.abc import Iterable

from agentsearch.pipeline.records.agent_runs import AgentSpec

RankKey = tuple[str, str, int]


def rank_key(spec: AgentSpec) -> RankKey:
    # What tells two steps of one job apart (agentsearch.pipeline.job.ledger.step_key): agent, config and priority.
    return spec.agent_id, spec.config_id or "", spec.priority


def name_ranks(specs: Iterable[AgentSpec]) -> dict[RankKey, int]:
    """Each spec's rank (1, 2, ...) among the given specs of its agent, ordered by priority, then config id."""
    ranks: dict[RankKey, int] = {}
    per_agent: dict[str, int] = {}
    for key in sorted({rank_key(s) for s in specs}, key=lambda k: (k[0], k[2], k[1])):
        per_agent[key[0]] = per_agent.get(key[0], 0) + 1
        ranks[key] = per_agent[key[0]]
    return ranks


def numbered(filename: str, rank: int) -> str:
    """``summary.txt`` for rank 1, ``summary-2.txt`` for rank 2; the number goes before the last extension."""
    if rank <= 1:
        return filename
    stem, dot, extension = filename.rpartition(".")
    if not dot or not stem:  # no extension ("notes"), or a leading dot only (".notes")
        return f"{filename}-{rank}"
    return f"{stem}-{rank}.{extension}"
