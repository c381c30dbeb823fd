"""The whole-job cache of a team: ten viewers asking the same questions of a team collection, without document
groups and with them.

A team member's job is answered from another member's cached job when the two searched with the same document
groups (``src/agentsearch/pipeline/job/submit.py``: the access filter is part of the cache key). So a team whose viewers
all hold the same groups shares every answer after the first asker's, and each different set of groups among them asks
the same questions again. This measures both on a real stack (``devstack``: its own Redis, a fresh PostgreSQL
database, milvus-lite server, one prefork worker of two processes, the API):

- a team made by the stack's user (its admin), ten users made as an operator makes them (``agentsearch users
  create``) and added as viewers, and two team collections of the sample corpus: one with every document open to
  every member, one where the eight quarterly reports are restricted to the group ``finance`` and the HR policy to
  ``hr`` (``"access": {"groups": [...]}`` of each document);
- round (a), no groups: each viewer in turn asks the same questions of the first collection;
- round (b), groups: the first 40% of the viewers are put in ``finance``, the next 30% in ``hr``, the rest in none
  (``PUT /v1/teams/{id}/groups/{group}/members/{user}``), and each asks the same questions of the second
  collection.

Each question is ``POST /v1/search?wait=60`` with the same agents, so a miss is answered when its job has run and a
hit at once; the time measured is that request's, and the response's ``cached`` flag says which it was. A read of
the collection right after each ask is the floor of an authenticated request at that moment (the machine's load
moves both). Every job's sources are checked against the asker's groups: no viewer is answered from a document it
may not find. The hit rate expected is ``1 - (different sets of groups among the viewers) / viewers``: 90% for one
set, 70% for three.

Usage::

    .venv/bin/python -m agentsearch.bench.team_cache                       # 10 viewers, 5 questions;
    src/agentsearch/bench/results/team_cache.md .venv/bin/agentsearch bench team-cache --viewers 10 --questions 5 --json
    team_cache.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import httpx

from agentsearch.bench.common import SAMPLE_CORPUS, bench_stack, machine, summary, wait_idle, write_result
from agentsearch.devstack import DevStack

QUESTIONS = [
    "What was Northwind Energy's revenue in Q4 2025?",
    "How much leave do Northwind employees get and can they work from home?",
    "How has solar panel efficiency improved?",
    "What is the capacity of the Kestrel Point battery storage project?",
    "How does Northwind maintain its wind turbines?",
    "What was Northwind's adjusted EBITDA in 2024?",
    "How do heat pumps provide demand flexibility?",
    "What foundations are used for offshore wind turbines?",
]
AGENTS = ["language_detector", "executive_summary"]
WARM_UP = "Which sources does this collection hold?"
# The documents of the second collection restricted to a group: the quarterly reports to finance, the HR policy to
# hr; the rest of the corpus stays open to every member.
RESTRICTED = {"finance": [f"nw-{year}-q{q}" for year in (2024, 2025) for q in range(1, 5)],
              "hr": ["nw-hr-flexible-work"]}


def viewer_groups(viewers: int) -> list[str | None]:
    """The group each viewer is in for round (b): the first 40% finance, the next 30% hr, the rest none."""
    finance, hr = round(viewers * 0.4), round(viewers * 0.3)
    return ["finance"] * finance + ["hr"] * hr + [None] * (viewers - finance - hr)


def expected_hit_rate(groups: list[str | None]) -> float:
    """The share of asks a cache shared by equal groups answers: all but the first viewer of each set of groups."""
    return 1 - len(set(groups)) / len(groups)


def restricted_documents(documents: list[dict]) -> list[dict]:
    """The corpus with the ``RESTRICTED`` documents' ``access``."""
    group_of = {doc_id: group for group, ids in RESTRICTED.items() for doc_id in ids}
    return [{**d, "access": {"groups": [group_of[d["id"]]]}} if d["id"] in group_of else d for d in documents]


def round_figures(asks: list[dict]) -> dict:
    """Hits, hit rate and the request's time for hits and for misses over one round's asks, and the floor's."""
    hits = [a["ms"] for a in asks if a["cached"]]
    misses = [a["ms"] for a in asks if not a["cached"]]
    return {"asks": len(asks), "hits": len(hits), "hit_rate": len(hits) / len(asks),
            "hit_ms": summary(hits) if hits else None, "miss_ms": summary(misses) if misses else None,
            "floor_ms": summary([a["floor_ms"] for a in asks])}


def team_collection(http: httpx.Client, team_id: str, name: str) -> str:
    made = http.post("/v1/collections", json={"name": name, "team_id": team_id})
    made.raise_for_status()
    return made.json()["id"]


def index(http: httpx.Client, collection_id: str, documents: list[dict], timeout_s: float) -> None:
    """Send the documents and wait until the workers indexed them all."""
    http.post(f"/v1/collections/{collection_id}/documents", json={"documents": documents}).raise_for_status()
    deadline = time.monotonic() + timeout_s
    while (counts := http.get(f"/v1/collections/{collection_id}").json()["documents"])["pending"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"indexing stuck: {counts}")
        time.sleep(0.5)
    if counts.get("failed"):
        raise RuntimeError(f"indexing failed for some documents: {counts}")


def hidden_from(http: httpx.Client, collection_id: str) -> None:
    """Check that the restricted documents were stored restricted: a member in no group (the admin here) finds none
    of them (404, as a missing document)."""
    for document_id in (ids[0] for ids in RESTRICTED.values()):
        read = http.get(f"/v1/collections/{collection_id}/documents/{document_id}")
        assert read.status_code == 404, f"{document_id} is open to a member in no group: {read.status_code}"


def ask_round(viewers: list[tuple[str, httpx.Client]], collection_id: str, questions: list[str],
              forbidden: dict[str, set[str]]) -> list[dict]:
    """Each viewer in turn asks every question; per ask the viewer, the question, ``cached``, the request's time and
    the time of the collection's read right after it (the floor of an authenticated request at that moment).
    ``forbidden``: the documents each viewer may not find, none of which may be among its job's sources."""
    asks = []
    for name, http in viewers:
        # The viewer's key verified before its turn (the API remembers it for a few seconds), as for a client that
        # has just signed in: the asks measure the search, not the key's first check.
        http.get(f"/v1/collections/{collection_id}").raise_for_status()
        for question in questions:
            body = {"collection_id": collection_id, "query": question, "agents": AGENTS}
            started = time.perf_counter()
            response = http.post("/v1/search", json=body, params={"wait": 60})
            ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            http.get(f"/v1/collections/{collection_id}").raise_for_status()
            floor_ms = (time.perf_counter() - started) * 1000
            answered = response.json()
            assert response.status_code == 200 and answered["status"] == "succeeded", response.text[:500]
            # A hit's answer is the job's stored response, read here as the viewer reads it.
            job = answered if "response" in answered else http.get(f"/v1/jobs/{answered['job_id']}").json()
            sources = {s["document_id"] for s in job["response"]["sources"]}
            leaked = sources & forbidden.get(name, set())
            assert not leaked, f"{name} was answered from {sorted(leaked)}, which it may not find"
            asks.append({"viewer": name, "question": question, "cached": answered["cached"], "ms": ms,
                         "floor_ms": floor_ms, "sources": sorted(sources)})
    return asks


def measure(stack: DevStack, viewers: int, questions: list[str], timeout_s: float = 600) -> dict:
    """Both rounds on a started stack: the team, its viewers and collections, then the asks."""
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    groups = viewer_groups(viewers)
    with ExitStack() as clients:
        admin = clients.enter_context(stack.http(timeout_s=120))
        made = admin.post("/v1/teams", json={"name": "bench-team"})
        made.raise_for_status()
        team_id = made.json()["id"]
        names = [f"viewer-{i:02d}" for i in range(viewers)]
        keys = {}
        for name in names:
            keys[name] = stack.create_user(name)
            admin.put(f"/v1/teams/{team_id}/members/{name}", json={"role": "viewer"}).raise_for_status()
        open_id = team_collection(admin, team_id, "handbook")
        index(admin, open_id, documents, timeout_s)
        groups_id = team_collection(admin, team_id, "handbook-groups")
        index(admin, groups_id, restricted_documents(documents), timeout_s)
        hidden_from(admin, groups_id)
        # A job on each collection first, of a question nobody asks later: the workers' first job loads what later
        # ones find loaded, which would otherwise fall on round (a)'s misses alone.
        for collection_id in (open_id, groups_id):
            warm = admin.post("/v1/search", params={"wait": 60},
                              json={"collection_id": collection_id, "query": WARM_UP, "agents": AGENTS})
            assert warm.status_code == 200 and warm.json()["status"] == "succeeded", warm.text[:500]
        wait_idle(stack)
        asking = [(name, clients.enter_context(stack.http(keys[name], timeout_s=120))) for name in names]
        load_a = os.getloadavg()
        first = ask_round(asking, open_id, questions, {})
        # Round (b): the groups given now, after round (a), so round (a) is asked by viewers in no group.
        for name, group in zip(names, groups, strict=True):
            if group is not None:
                admin.put(f"/v1/teams/{team_id}/groups/{group}/members/{name}").raise_for_status()
        closed = {doc_id for ids in RESTRICTED.values() for doc_id in ids}
        forbidden = {name: closed - set(RESTRICTED.get(group or "", []))
                     for name, group in zip(names, groups, strict=True)}
        load_b = os.getloadavg()
        second = ask_round(asking, groups_id, questions, forbidden)
    shown = {group or "none": sum(1 for g in groups if g == group) for group in dict.fromkeys(groups)}
    # What the groups changed in the answers: per group, the asks answered with a source only the group finds.
    group_of = dict(zip(names, groups, strict=True))
    citing = {group or "none": sum(1 for a in second if group_of[a["viewer"]] == group and set(a["sources"]) & closed)
              for group in dict.fromkeys(groups)}
    return {
        "viewers": viewers, "questions": len(questions), "agents": AGENTS,
        "no_groups": {**round_figures(first), "expected_hit_rate": expected_hit_rate([None] * viewers),
                      "load": load_a},
        "groups": {**round_figures(second), "expected_hit_rate": expected_hit_rate(groups), "load": load_b,
                   "viewers_per_group": shown, "restricted": RESTRICTED, "asks_citing_restricted": citing},
        "asks": {"no_groups": first, "groups": second},
    }


def public(result: dict) -> dict:
    """The figures without each ask."""
    return {k: v for k, v in result.items() if k != "asks"}


def _ratio(r: dict) -> str:
    return f"{r['hit_ms']['p50'] / r['floor_ms']['p50']:.2f}" if r["hit_ms"] else "-"


def _ms(figures: dict | None, key: str) -> str:
    return f"{figures[key]:.1f}" if figures else "-"


def _restricted(restricted: dict[str, list[str]]) -> str:
    return "its collection has " + " and ".join(f"{len(ids)} document{'s' * (len(ids) > 1)} restricted to {group}"
                                                for group, ids in restricted.items())


def report(result: dict, command: str, started: datetime, about: dict) -> str:
    """The Markdown of ``src/agentsearch/bench/results/team_cache.md``: both rounds side by side."""
    rounds = {"(a) no groups": result["no_groups"], "(b) groups": result["groups"]}
    rows = "".join(
        f"| {label} | {r['asks']} | {r['hits']} | **{r['hit_rate']:.0%}** | {r['expected_hit_rate']:.0%} | "
        f"{_ms(r['hit_ms'], 'p50')} | {_ms(r['hit_ms'], 'p95')} | {_ms(r['miss_ms'], 'p50')} | "
        f"{_ms(r['miss_ms'], 'p95')} | {_ms(r['floor_ms'], 'p50')} | {_ratio(r)} | {r['load'][0]:.2f} |\n"
        for label, r in rounds.items())
    citing = result["groups"].get("asks_citing_restricted") or {}
    cited = ("\nRound (b)'s asks answered with a restricted document, per group of the asker: "
             + ", ".join(f"{group} {n}" for group, n in citing.items()) + ".") if citing else ""
    per_group = ", ".join(f"{n} {group}" for group, n in result["groups"]["viewers_per_group"].items())
    return (
        "# The whole-job cache of a team, without and with document groups\n\n"
        f"{started:%Y-%m-%d %H:%M} UTC, {about['nproc']} CPUs, Python {about['Python']}; stack: PostgreSQL, Redis, "
        "milvus-lite server, one prefork worker of two processes, uvicorn (one process); other test suites shared "
        "the machine (load average at the start of each round in the table).\n\n"
        f"Command: `{command}`\n\n"
        f"{result['viewers']} viewers of one team, each in turn asking the same {result['questions']} questions "
        f"(`POST /v1/search?wait=60`, agents {', '.join(result['agents'])}) of a team collection of the sample "
        f"corpus. Round (b): viewers per group {per_group}; {_restricted(result['groups']['restricted'])}. A hit "
        "is a response with `cached: true`; its time and a miss's are the request's, a miss's including its job's "
        "run; the floor is a `GET /v1/collections/{id}` "
        "(authentication and one read) right after each ask, each viewer's key verified before its turn. Every "
        "answer's sources were checked against the asker's groups.\n\n"
        "| round | asks | hits | hit rate | expected | hit p50 ms | hit p95 ms | miss p50 ms | miss p95 ms | "
        "floor p50 ms | hit / floor | load |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" + rows
        + cited + "\n"
    )


def command_line(viewers: int, questions: int, script: bool = False) -> str:
    command = ".venv/bin/python -m agentsearch.bench.team_cache" if script else ".venv/bin/agentsearch bench team-cache"
    return f"{command} --viewers {viewers} --questions {questions}"


def run(viewers: int = 10, questions: int = 5) -> dict:
    """Both rounds on a stack of its own; the figures with each ask."""
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp, bench_stack(Path(tmp)) as stack:
        wait_idle(stack)
        return measure(stack, viewers, QUESTIONS[:questions])


def write(result: dict, command: str, started: datetime) -> str:
    """The report written to ``src/agentsearch/bench/results/team_cache.md``, and returned."""
    return write_result("team_cache.md", report(result, command, started, machine()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", type=int, default=10)
    parser.add_argument("--questions", type=int, default=5, choices=range(1, len(QUESTIONS) + 1))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    started = datetime.now(UTC)
    result = run(args.viewers, args.questions)
    print(write(result, command_line(args.viewers, args.questions, script=True), started))
    if args.json:
        args.json.write_text(json.dumps(public(result), indent=2) + "\n")


if __name__ == "__main__":
    main()
