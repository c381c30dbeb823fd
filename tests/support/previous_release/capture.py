"""What a release's workers send and store, captured from its own code: the fixtures of the rolling-upgrade tests.

Run with this repository's Python on a checkout of the release (``--tree``): its modules are imported, not this
checkout's. ``capture`` writes, next to this file,

- ``job_states.json``: ``JobState`` JSON of jobs in several stages (queued, searched, answered, responded, agentic),
  the agent specs of the jobs (``config_snapshot``), their response agents' records and the response ``assemble``
  stores, as the release's models dump them;
- ``job_messages.json``: the Celery messages (headers and body) the release's ``enqueue_job`` puts on the broker for
  a job: one collection, several collections, the agentic head; a job's whole canvas rides in its first message;
- ``task_signatures.json``: every task the release registers, with its queue and its parameters;
- ``job_state_schema.json``: the JSON schema of the release's ``JobState``.

``read FILE`` loads every state, spec and agent record of ``FILE`` (the same layout as ``job_states.json``) with the
tree's models and prints what it read; it exits 1 with the first error when one does not load. Run against the
previous release, it says whether that release's workers read what the current code writes. With ``--database``
it also reads every row of that database with the tree's models, loads each job's state, and writes a document and
a job (rolled back): the release's API and workers at work on a database already migrated past them.

Usage::

    git worktree add /tmp/prev-release 77f5e0a
    .venv/bin/python tests/support/previous_release/capture.py capture --tree /tmp/prev-release
    .venv/bin/python tests/support/previous_release/capture.py read current.json --tree /tmp/prev-release \
        --database postgresql+psycopg://postgres@127.0.0.1:5432/agentsearch
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Ids the fixtures name: a test that replays a message maps them to rows of its own.
JOB_ID = "7e57c0de-0000-4000-8000-000000000001"
COLLECTION_ID = "7e57c0de-0000-4000-8000-0000000000c1"
SECOND_COLLECTION_ID = "7e57c0de-0000-4000-8000-0000000000c2"
USER_ID = "7e57c0de-0000-4000-8000-0000000000a1"
CONVERSATION_ID = "7e57c0de-0000-4000-8000-0000000000d1"
QUERY = "What was Northwind Energy's revenue in Q4 2025?"
# The job of the replayed message: agents the stack runs offline, two pre-search agents (told their peers), a
# post-search agent with a fallback, and one response agent under two configs (the second told its rank).
SPECS = [
    {"agent_id": "language_detector", "stage": "pre_search", "priority": 0, "config_id": "cfg-lang"},
    {"agent_id": "acronym_resolver", "stage": "pre_search", "priority": 10, "config_id": "cfg-acro",
     "config": {"acronyms": {"Q4": "fourth quarter"}}},
    {"agent_id": "deduplicator", "stage": "post_search", "config_id": "cfg-dedup", "config": {"threshold": 0.5},
     "fallback": {"agent_id": "relevance_filter", "stage": "post_search", "config_id": "cfg-filter"}},
    {"agent_id": "executive_summary", "stage": "response", "config_id": "cfg-sum-a", "config": {"max_words": 80}},
    {"agent_id": "executive_summary", "stage": "response", "config_id": "cfg-sum-b", "priority": 5,
     "config": {"max_words": 40}, "timeout_s": 20.0},
]


def use_tree(tree: Path) -> None:
    """Import the release's modules, not this checkout's, and keep its Celery in-process (a memory broker)."""
    sys.path.insert(0, str(tree))
    for name in [n for n in os.environ if n.startswith("AGENTSEARCH_")]:
        del os.environ[name]
    os.environ["AGENTSEARCH_DATA_DIR"] = tempfile.mkdtemp(prefix="agentsearch-capture-")


def job_states() -> dict[str, Any]:
    from pipeline.documents import Citation, CotStep, Document, Source
    from pipeline.job.state import AgentRun, AgentSpec, ArtifactRef, JobState

    specs = [AgentSpec.model_validate(spec) for spec in SPECS]
    queued = JobState(job_id=JOB_ID, collection_id=COLLECTION_ID, user_id=USER_ID, query=QUERY, original_query=QUERY,
                      top_k=5, cot=True, search={"strategies": ["dense", "sparse"]}, collections={COLLECTION_ID: 3},
                      metadata={"request": {"language": "en"}}, conversation_id=CONVERSATION_ID,
                      traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                      stage_timeouts={"pre_search": 10.0, "response": 60.0}, stage_clock={"pre_search": 1.7e9},
                      history=[{"role": "user", "content": "Who is Northwind?"},
                               {"role": "assistant", "content": "An energy company [1]."}])
    pre = AgentRun(agent_id="language_detector", config_id="cfg-lang", stage="pre_search", success=True, status="ok",
                   data={"language": "en"}, duration_ms=1.5, worker="w1:101", next_agent_id="acronym_resolver")
    searched = queued.model_copy(deep=True, update={
        "query": f"{QUERY} (fourth quarter)", "agent_runs": [pre], "timings_ms": {"pre_search": 2.0, "core_search": 30},
        "routes": {"pre_search": {"agent_id": "acronym_resolver", "config_id": "cfg-acro"}},
        "documents": [Document(id="nw-2025-q4#0", title="Q4 results", text="Revenue reached $412 million.", score=0.91,
                               metadata={"location": {"page": 2}, "published": "2026-01-15"})],
        "metadata": {"language": "en", "search": {"strategies": {"dense": {"hits": 1}}, "degraded": False}}})
    answered = searched.model_copy(deep=True, update={
        "answer": "Q4 2025 revenue reached $412 million [1].",
        "sources": [Source(document_id="nw-2025-q4", title="Q4 results", score=0.91, location={"page": 2})],
        "cot_steps": [CotStep(step=1, thought="The Q4 report states revenue.", evidence=["nw-2025-q4"])],
        "citations": [Citation(sentence="Q4 2025 revenue reached $412 million [1].", source=1,
                               document_id="nw-2025-q4", location={"page": 2}, span=(0, 29), status="supported",
                               score=0.97)]})
    summary = AgentRun(agent_id="executive_summary", config_id="cfg-sum-a", stage="response", success=True,
                       status="ok", duration_ms=12.0, worker="w2:202",
                       artifact=ArtifactRef(id="a1", agent_id="executive_summary", type="summary",
                                            filename="executive_summary.md", content_type="text/markdown", size=64))
    stood_in = AgentRun(agent_id="executive_summary", config_id="cfg-sum-b", stage="response", success=False,
                        status="error", errors=["RuntimeError: boom"], worker="w2:202",
                        stand_in=AgentRun(agent_id="email_draft", config_id="cfg-mail", stage="response",
                                          success=True, status="ok", stood_in_for="executive_summary"))
    responded = answered.model_copy(deep=True, update={"agent_runs": [pre, summary], "timings_ms": {
        "pre_search": 2.0, "core_search": 30.0, "answer": 4.0, "response": 12.0}})
    agentic = queued.model_copy(deep=True, update={"agentic": agentic_spec()})
    from pipeline.job.assembly import assemble_response

    return {
        "states": {"queued": queued.dump(), "searched": searched.dump(), "answered": answered.dump(),
                   "responded": responded.dump(), "agentic": agentic.dump()},
        "specs": [spec.model_dump(mode="json") for spec in specs],
        "response_runs": [run.model_dump(mode="json") for run in (summary, stood_in)],
        "response": assemble_response(answered, [summary, *stood_in.flat()]),
    }


def agentic_spec() -> dict[str, Any]:
    from pipeline.agentic.spec import AgenticSpec

    return AgenticSpec.for_request({"max_iterations": 2}, None, None, test_mode=True).model_dump(mode="json")


def job_messages() -> dict[str, Any]:
    """The first message of each canvas, as the release's ``enqueue_job`` sends it (its canvas rides inside)."""
    from pipeline.job.state import AgentSpec, JobState
    from worker.app import app
    from worker.canvas import enqueue_job

    specs = [AgentSpec.model_validate(spec) for spec in SPECS]
    state = JobState(job_id=JOB_ID, collection_id=COLLECTION_ID, user_id=USER_ID, query=QUERY, original_query=QUERY,
                     cot=True, collections={COLLECTION_ID: 0})
    both = state.model_copy(update={"collections": {COLLECTION_ID: 0, SECOND_COLLECTION_ID: 0}})
    agentic = state.model_copy(update={"agentic": agentic_spec()})
    messages = {}
    with app.connection_for_write() as conn:
        queue = conn.SimpleQueue("celery", no_ack=True)
        for name, job in (("single", state), ("collections", both), ("agentic", agentic)):
            task_ids = enqueue_job(JOB_ID, specs, job, default_timeout_s=30.0)
            message = queue.get(timeout=5)
            headers = {k: v for k, v in message.headers.items() if k not in ("origin", "argsrepr", "kwargsrepr")}
            messages[name] = {"headers": headers, "body": message.decode(), "task_ids": task_ids}
        queue.close()
    return messages


def task_signatures() -> dict[str, Any]:
    from worker import app as app_module

    for module in app_module.TASK_MODULES:
        importlib.import_module(module)
    app = app_module.app
    routes = app.conf.task_routes or {}
    tasks = {}
    for name in sorted(n for n in app.tasks if n.startswith("agentsearch.")):
        parameters = []
        for p in inspect.signature(app.tasks[name].run).parameters.values():
            parameters.append({"name": p.name, "kind": p.kind.name, "required": p.default is inspect.Parameter.empty})
        queue = routes.get(name, {}).get("queue", app.conf.task_default_queue)
        tasks[name] = {"queue": queue, "parameters": parameters}
    return tasks


def capture(out: Path) -> None:
    from pipeline.job.state import JobState

    files = {"job_states.json": job_states(), "job_messages.json": job_messages(),
             "task_signatures.json": task_signatures(), "job_state_schema.json": JobState.model_json_schema()}
    for name, content in files.items():
        (out / name).write_text(json.dumps(content, indent=1, sort_keys=True) + "\n")
        print(f"wrote {out / name}")


def read(path: Path, database_url: str | None) -> int:
    from pipeline.job.state import AgentRun, AgentSpec, JobState

    content = json.loads(path.read_text())
    try:
        states = {name: JobState.load(state) for name, state in content["states"].items()}
        specs = [AgentSpec.model_validate(spec) for spec in content["specs"]]
        runs = [AgentRun.model_validate(run) for run in content["response_runs"]]
        rows = read_database(database_url) if database_url else {}
    except Exception as exc:  # noqa: BLE001 - the reader reports what did not load, whatever it was
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps({"states": {name: s.query for name, s in states.items()}, "specs": len(specs),
                      "response_runs": len(runs), **rows}))
    return 0


def read_database(url: str) -> dict[str, Any]:
    """Every row of every table the tree maps, each job's state loaded; then a document and a job written the way
    the tree's API writes them, and rolled back."""
    from datetime import UTC, datetime
    from uuid import uuid4

    from pipeline.job.state import JobState
    from pipeline.platform.db import Base, DocumentRow, Job
    from sqlalchemy import create_engine, select
    from sqlalchemy.orm import Session

    engine = create_engine(url)
    tables, states = {}, 0
    with engine.connect() as conn, Session(conn) as s:
        for mapper in Base.registry.mappers:
            rows = s.scalars(select(mapper.class_)).all()
            tables[mapper.class_.__tablename__] = len(rows)
        for state in s.scalars(select(Job.state).where(Job.state.is_not(None))):
            if "schema_version" in state:  # not the rows of generic values a schema test fills tables with
                JobState.load(state)
                states += 1
        job = s.scalars(select(Job).where(Job.state.is_not(None))).first()
        s.add(DocumentRow(collection_id=job.collection_id, external_id=f"release-{uuid4().hex}", text="t"))
        s.add(Job(user_id=job.user_id, collection_id=job.collection_id, query="q", status="queued",
                  deadline_at=datetime.now(UTC)))
        s.flush()
        conn.rollback()
    engine.dispose()
    return {"tables": tables, "job_states": states}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["capture", "read"])
    parser.add_argument("file", nargs="?", type=Path, help="read: the states to load")
    parser.add_argument("--tree", type=Path, required=True, help="a checkout of the release whose code runs")
    parser.add_argument("--out", type=Path, default=HERE, help="capture: where the fixtures go")
    parser.add_argument("--database", help="read: a database URL whose rows the tree's models read too")
    args = parser.parse_args()
    use_tree(args.tree.resolve())
    if args.command == "read":
        return read(args.file, args.database)
    capture(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
