"""Log lines carry the job, task and agent they belong to: bound by the task hooks and the runner (fakeredis)."""

from __future__ import annotations

import io
import json
import logging

import pytest
from celery.signals import task_postrun, task_prerun

from agentsearch.pipeline.agents.base import AgentContext, PreSearchAgent, PreSearchInput, PreSearchOutput, Stage
from agentsearch.pipeline.agents.runner import AgentRunner
from agentsearch.pipeline.observability.logs import configure_logging, current_ids, log_context
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.worker.observability import job_id_of

agent_log = logging.getLogger("agentsearch.test.chatty")


class Chatty(PreSearchAgent):
    """Logs from inside its run, which the runner executes on a thread of its own (the deadline thread)."""

    agent_id = "chatty"
    cacheable = False

    def run(self, inp, ctx):
        agent_log.warning("looking up synonyms for %s", inp.query)
        return PreSearchOutput(query=inp.query)


@pytest.fixture
def captured():
    """The root logger configured as a process would be, writing to a buffer; put back as it was afterwards."""
    root = logging.getLogger()
    level = root.level

    def configure(log_format: str) -> io.StringIO:
        stream = io.StringIO()
        handlers.append(configure_logging(log_format, "INFO", stream=stream))
        return stream

    handlers: list[logging.Handler] = []
    yield configure
    for handler in handlers:
        root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture
def runner(make_runner) -> AgentRunner:
    return make_runner(Chatty)


def json_lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def run_chatty(runner: AgentRunner) -> None:
    run, _ = runner.run(
        AgentSpec(agent_id="chatty", stage=Stage.PRE_SEARCH),
        PreSearchInput(query="grid storage"),
        AgentContext(pipeline_stage=Stage.PRE_SEARCH),
    )
    assert run.status == "ok"


def test_a_line_logged_inside_an_agent_run_has_job_task_and_agent_ids_as_json(captured, runner):
    stream = captured("json")
    # What the Celery task hook does for a pre-search agent task: its state is the first argument.
    task_prerun.send(sender=None, task_id="task-7", task=None, args=({"job_id": "job-42", "query": "q"},), kwargs={})
    try:
        run_chatty(runner)
    finally:
        task_postrun.send(sender=None, task_id="task-7", task=None, args=(), kwargs={}, retval=None, state="SUCCESS")

    lines = [line for line in json_lines(stream) if line["logger"] == "agentsearch.test.chatty"]
    assert len(lines) == 1
    line = lines[0]
    assert (line["job_id"], line["task_id"], line["agent_id"]) == ("job-42", "task-7", "chatty")
    assert line["message"] == "looking up synonyms for grid storage"
    assert line["level"] == "WARNING"
    # Once the task is over nothing stays bound for the next task of this process.
    assert current_ids() == {"job_id": None, "task_id": None, "agent_id": None}


def test_outside_any_context_the_fields_are_null_and_explicit_extra_wins(captured):
    stream = captured("json")
    logging.getLogger("agentsearch.test").warning("idle")
    with log_context(job_id="job-1"):
        logging.getLogger("agentsearch.test").warning("replayed", extra={"job_id": "job-2"})
    idle, replayed = json_lines(stream)
    assert (idle["job_id"], idle["task_id"], idle["agent_id"]) == (None, None, None)
    assert replayed["job_id"] == "job-2"


def test_text_format_appends_only_the_bound_ids(captured, runner):
    stream = captured("text")
    with log_context(job_id="job-42"):
        run_chatty(runner)
    line = next(line for line in stream.getvalue().splitlines() if "looking up synonyms" in line)
    assert line.endswith("[job_id=job-42 agent_id=chatty]")
    assert "task_id" not in line


def test_a_failing_agent_is_logged_with_its_ids(captured, make_runner):
    class Failing(PreSearchAgent):
        agent_id = "failing"
        cacheable = False

        def run(self, inp, ctx):
            raise RuntimeError("thesaurus down")

    stream = captured("json")
    runner = make_runner(Failing)
    with log_context(job_id="job-9", task_id="task-9"):
        run, _ = runner.run(AgentSpec(agent_id="failing", stage=Stage.PRE_SEARCH), PreSearchInput(query="q"),
                            AgentContext(pipeline_stage=Stage.PRE_SEARCH))
    assert run.status == "error"
    line = next(line for line in json_lines(stream) if line["logger"] == "agentsearch.runner")
    assert (line["job_id"], line["task_id"], line["agent_id"], line["level"]) == (
        "job-9", "task-9", "failing", "WARNING")
    assert "thesaurus down" in line["message"]


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        (({"job_id": "j1", "query": "q"}, {"agent_id": "a"}), {}, "j1"),  # an agent task: (state, spec)
        (([{"job_id": "j2"}, {"job_id": "j2"}],), {}, "j2"),  # merge_search: the group's states
        (([{"agent_id": "a"}],), {"job_id": "j3"}, "j3"),  # assemble: the records, and job_id by keyword
        ((), {}, None),
        (("not a state",), {}, None),
    ],
)
def test_job_id_of_finds_the_job_in_every_task_signature(args, kwargs, expected):
    assert job_id_of(args, kwargs) == expected


def test_an_unknown_context_field_is_refused():
    with pytest.raises(ValueError, match="user_id"), log_context(user_id="u1"):
        pass


def test_celery_task_lines_keep_their_task_facts_but_not_the_state_they_carried(captured):
    stream = captured("json")
    data = {"id": "t1", "name": "agentsearch.core_search", "runtime": 0.4, "args": "({'query': 'salary of J. Doe'},)",
            "kwargs": "{}", "return_value": "{'query': 'salary of J. Doe'}"}
    logging.getLogger("celery.app.trace").info("Task %(name)s[%(id)s] succeeded", data, extra={"data": data})
    logging.getLogger("agentsearch.test").info("own data", extra={"data": {"args": [1]}})
    celery_line, own_line = json_lines(stream)
    assert celery_line["data"] == {"id": "t1", "name": "agentsearch.core_search", "runtime": 0.4}
    assert own_line["data"] == {"args": [1]}
