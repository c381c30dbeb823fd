"""One version back: what the previous release's workers and API sent and stored is read by the current code, and
what the current code writes is read by the previous release, so the two run side by side in a rolling upgrade.

The fixtures are the release's own output (``tests/support/previous_release/capture.py`` ran its code): job states
in several stages, the messages of its canvases, its tasks' signatures and its ``JobState`` schema. At the next
release they are captured again from this one (docs/operations.md, "Upgrades").
"""

from __future__ import annotations

import inspect
import uuid

import jsonschema
import pytest

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.ingestion.lease import claim, finish, queue
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.stage_budget import start_clock
from agentsearch.pipeline.platform.tables.collections import DocumentRow
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec
from agentsearch.worker import app as app_module
from tests.support.previous_release.capture import JOB_ID
from tests.support.previous_release.messages import calls, load

STATES = load("job_states.json")
MESSAGES = load("job_messages.json")


@pytest.fixture(scope="module")
def current_tasks():
    import importlib

    for module in app_module.TASK_MODULES:
        importlib.import_module(module)
    return app_module.app.tasks


def _subset(old, new, path: str = "") -> list[str]:
    """Where ``new`` differs from ``old`` in what ``old`` has (a key ``new`` adds is no difference)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in old for d in (_subset(old[k], new[k], f"{path}.{k}") if k in new else [f"{path}.{k}"])]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for n, (o, c) in enumerate(zip(old, new)) for d in _subset(o, c, f"{path}[{n}]")]
    return [] if old == new else [f"{path}: {old!r} -> {new!r}"]


@pytest.mark.parametrize("stage", sorted(STATES["states"]))
def test_the_current_job_state_reads_every_state_the_previous_release_wrote(stage):
    old = STATES["states"][stage]
    state = JobState.load(old)
    assert _subset(old, state.dump()) == []  # nothing lost or changed on the way through the current model
    assert state.job_id == old["job_id"] and len(state.documents) == len(old["documents"])


def test_the_previous_release_specs_and_agent_records_load():
    specs = [AgentSpec.model_validate(spec) for spec in STATES["specs"]]
    assert [s.stage for s in specs].count(Stage.RESPONSE) == 2 and specs[2].fallback is not None
    runs = [AgentRun.model_validate(run) for run in STATES["response_runs"]]
    assert [r.agent_id for run in runs for r in run.flat()] == ["executive_summary", "executive_summary", "email_draft"]
    for old, run in zip(STATES["response_runs"], runs):
        assert _subset(old, run.model_dump(mode="json")) == []


def test_what_the_current_job_state_writes_fits_the_previous_release_schema():
    """The previous release's workers validate a state with its model: what ours hand on must fit its schema
    (a field it requires, a type it expects, ``schema_version`` 1)."""
    schema = load("job_state_schema.json")
    for old in STATES["states"].values():
        state = JobState.load(old)
        start_clock(state, Stage.RESPONSE)
        state.agent_runs.append(AgentRun(agent_id="deduplicator", stage=Stage.POST_SEARCH, success=True, status="ok"))
        jsonschema.validate(state.dump(), schema)
    fresh = JobState(job_id=str(uuid.uuid4()), collection_id=str(uuid.uuid4()), query="q")
    jsonschema.validate(fresh.dump(), schema)
    with pytest.raises(jsonschema.ValidationError):  # the schema check is not vacuous: another version is refused
        jsonschema.validate({**fresh.dump(), "schema_version": 2}, schema)


def accepted(task) -> inspect.Signature:
    """The arguments Celery's type check lets a message call ``task`` with: its ``__header__``, the task's own less
    ``self`` when bound. Not ``run``'s signature: autoretry's wrapper stands there, and through it a bound task's
    wrapped method shows ``self``."""
    return inspect.signature(task.__header__)


def test_every_task_of_the_previous_release_is_registered_on_its_queue_and_takes_its_arguments(current_tasks):
    routes = app_module.app.conf.task_routes
    for name, old in load("task_signatures.json").items():
        assert name in current_tasks, f"{name} is gone: a message of the previous release would be dropped"
        assert routes.get(name, {}).get("queue", app_module.DEFAULT_QUEUE) == old["queue"], name
        params = list(accepted(current_tasks[name]).parameters.values())
        for n, before in enumerate(old["parameters"]):
            assert params[n].name == before["name"] and params[n].kind.name == before["kind"], (name, before)
            if not before["required"]:
                assert params[n].default is not inspect.Parameter.empty, (name, before)
        added = params[len(old["parameters"]):]
        assert all(p.default is not inspect.Parameter.empty for p in added), f"{name}: a new required argument"


@pytest.mark.parametrize("canvas", sorted(MESSAGES))
def test_every_call_of_a_previous_release_canvas_binds_to_a_current_task(canvas, current_tasks):
    seen = []
    for call in calls(MESSAGES[canvas]):
        bound = accepted(current_tasks[call.task]).bind(*[None] * call.leading, *call.args, **call.kwargs)
        if bound.arguments.get("state") is not None:
            assert JobState.load(bound.arguments["state"]).job_id == JOB_ID
        if "spec" in bound.arguments:
            AgentSpec.model_validate(bound.arguments["spec"])
        seen.append(call.task)
    assert seen[0] == "agentsearch.pre_search_agent" and "agentsearch.job_failed" in seen


def test_a_document_the_previous_release_sent_again_is_taken_by_the_current_worker(migrated_db, collection_id):
    """The release's API marks a document pending again and sends a task of a new id, leaving the task, worker and
    end of the ingestion before (it knew no leases): the current worker takes the document all the same."""
    with migrated_db.session() as s:
        row = DocumentRow(collection_id=collection_id, external_id="d1", text="t")
        s.add(row)
        s.flush()
        queue(row, "task-1")
        assert claim([row], "task-1", 0, "w1@host", 3) == [row]
        finish(s, [row.id], "task-1", "indexed", chunks={"d1": 2})
        # What the release's add_documents wrote, and nothing else.
        row.text, row.status, row.error = "t2", "pending", None
        assert claim([row], "task-2", 0, "w2@host", 3) == [row]
        assert (row.task_id, row.worker, row.finished_at, row.chunks, row.attempts) == ("task-2", "w2@host", None,
                                                                                        None, 0)
        # The stale message of a second release-sent task finds the document taken, as one of ours would.
        assert claim([row], "task-3", 0, "w3@host", 3) == []
        assert finish(s, [row.id], "task-2", "indexed", chunks={"d1": 3})[0].chunks == 3
