"""The Celery side is a table of the workflow: each node of ``agentsearch.pipeline.job.workflow``'s graphs has its task
under its name, every step's work and hooks are named functions a reader can follow, the canvas holds the graph's order,
and no task body in ``src/agentsearch/worker/`` grows past 25 lines."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.job import workflow
from agentsearch.pipeline.job.step_protocol import Step
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.worker import agentic_tasks, job_tasks
from agentsearch.worker.app import app
from agentsearch.worker.job_tasks import build_agentic_head, build_agentic_tail, build_job_canvas

WORKER = Path(__file__).resolve().parents[3] / "src" / "agentsearch" / "worker"
# The ingestion's tasks are the ingestion package's to keep short.
NOT_HERE = {"parse_document", "ingest_documents"}
NODES = {n for graph in (workflow.JOB, workflow.ITERATIVE_HEAD, workflow.ITERATIVE_TAIL) for n in graph} | {
    workflow.MERGE_SEARCH, workflow.ASSEMBLE}
SPECS = [AgentSpec(agent_id="language_detector", stage=Stage.PRE_SEARCH),
         AgentSpec(agent_id="deduplicator", stage=Stage.POST_SEARCH),
         AgentSpec(agent_id="executive_summary", stage=Stage.RESPONSE)]


def _functions(step: Step) -> dict[str, object]:
    return {f.name: getattr(step, f.name) for f in dataclasses.fields(step) if callable(getattr(step, f.name))}


@pytest.mark.parametrize("node", sorted(NODES, key=lambda n: n.task), ids=lambda n: n.task)
def test_each_node_has_its_task_and_its_step_names_its_work(node):
    assert node.task in app.tasks, f"{node.task}: no task runs this step"
    for field, function in _functions(node.step).items():
        name = getattr(function, "__qualname__", "")
        assert name and "<lambda>" not in name and "<locals>" not in name, (node.task, field, name)
        assert inspect.getmodule(function).__name__.startswith("agentsearch.pipeline."), (node.task, field)


def test_the_worker_adds_only_what_follows_a_step_in_celery():
    assert agentic_tasks.BEGIN.step.work is workflow.AGENTIC_BEGIN.step.work
    assert agentic_tasks.BEGIN.step.then is agentic_tasks.start_loops
    assert set(job_tasks.TASKS) <= {n.task for n in NODES}


def test_the_canvas_holds_the_graphs_order():
    def names(canvas):
        found = []
        for task in canvas.tasks:
            found += [t.task for t in task.tasks] + [task.body.task] if hasattr(task, "body") else [task.task]
        return found

    assert names(build_job_canvas("j", SPECS)) == [n.task for n in workflow.JOB] + [workflow.ASSEMBLE.task]
    assert names(build_agentic_head("j", SPECS)) == [n.task for n in workflow.ITERATIVE_HEAD]
    assert names(build_agentic_tail("j", SPECS)) == [n.task for n in workflow.ITERATIVE_TAIL] + [
        workflow.ASSEMBLE.task]


def _task_bodies() -> dict[str, int]:
    """Each Celery task of ``src/agentsearch/worker/``: the lines of its body, its docstring aside."""
    bodies = {}
    for path in sorted(WORKER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any(".task" in ast.unparse(d) for d in node.decorator_list):
                body = node.body
                if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                    body = body[1:]
                bodies[f"{path.name}:{node.name}"] = body[-1].end_lineno - body[0].lineno + 1
    return bodies


def test_every_task_body_is_at_most_25_lines():
    bodies = _task_bodies()
    assert "job_tasks.py:assemble" in bodies and "agentic_tasks.py:agentic_iteration" in bodies
    long = {name: lines for name, lines in bodies.items() if lines > 25 and name.split(":")[1] not in NOT_HERE}
    assert long == {}
