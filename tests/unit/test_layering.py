"""The layers of the code as its imports draw them: a total order, no import circle, no framework in
``src/agentsearch/pipeline/``.

The top-level folders, lowest first (each may import only itself and the folders before it)::

    pipeline < migrations < worker < api < devstack < bench < cli

``pipeline`` is the work itself and imports no other folder; ``migrations`` reads its tables; ``worker`` runs its
steps as Celery tasks; ``api`` serves it and queues the worker's tasks; ``devstack`` starts the deployment's processes
on one machine; ``bench`` measures a running stack; ``cli`` is the ``agentsearch`` command over all of them
(``agentsearch bench`` runs the benches, ``agentsearch api`` the API).

The packages of ``src/agentsearch/pipeline/`` (and its single-module ones, ``documents.py``, ``refusal.py``,
``services.py``), lowest first, each importing only itself and the ones before it: ``PIPELINE_LAYERS`` below. A new
package is added to that list where its imports put it; the test fails until it is.

The graph is read from the source with ``ast``, nothing imported: every import of a module, those under
``if TYPE_CHECKING:`` and those inside its functions too (an import put off until a call is still a dependency).
``from agentsearch.pipeline.x import name`` is an edge to ``agentsearch.pipeline.x.name`` when that is a module, else
to ``agentsearch.pipeline.x``.

Usage::

    .venv/bin/pytest -q tests/unit/test_layering.py
    .venv/bin/python tests/unit/test_layering.py          # the imports running back up, and the graph's circles
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Lowest first: a folder imports only itself and the folders before it.
FOLDERS = ("pipeline", "migrations", "worker", "api", "devstack", "bench", "cli")
# The one package they are all in (src/ layout).
PACKAGE = REPO / "src" / "agentsearch"
# Lowest first: a package of src/agentsearch/pipeline/ imports only itself and the packages before it. ``records`` holds
# the contracts every layer reads (an agent's run, an artifact's reference, a finished job's response); the agents and
# the searches run below the job; the job, the operations on stored jobs and the evaluations over jobs above it.
PIPELINE_LAYERS = (
    "agentsearch.pipeline",  # the package's own __init__
    "agentsearch.pipeline.refusal",
    "agentsearch.pipeline.documents",
    "agentsearch.pipeline.platform",
    "agentsearch.pipeline.records",
    "agentsearch.pipeline.text",
    "agentsearch.pipeline.parsing",
    "agentsearch.pipeline.retrieval",
    "agentsearch.pipeline.security",
    "agentsearch.pipeline.observability",
    "agentsearch.pipeline.agents",
    "agentsearch.pipeline.agentic",
    "agentsearch.pipeline.services",
    "agentsearch.pipeline.ingestion",
    "agentsearch.pipeline.sources",
    "agentsearch.pipeline.webhooks",
    "agentsearch.pipeline.job",
    "agentsearch.pipeline.operations",
    "agentsearch.pipeline.eval",
)
FRAMEWORKS = ("celery", "fastapi", "starlette", "kombu")
# What must run without a job: the agent machinery and the built-in agents, the metrics and the traces they write,
# and the quotas a submission checks. They read the records (agentsearch.pipeline.records) and refusals
# (agentsearch.pipeline.refusal), never the job's state. The order above holds this too; it is kept by name, as the
# reason the order is so.
BELOW_THE_JOB = ("agentsearch.pipeline.agents", "agentsearch.pipeline.observability.metrics",
                 "agentsearch.pipeline.observability.tracing", "agentsearch.pipeline.security.quotas")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for folder in FOLDERS for p in (PACKAGE / folder).rglob("*.py")}
PIPELINE = {m for m in MODULES if m == "agentsearch.pipeline" or m.startswith("agentsearch.pipeline.")}


@dataclass(frozen=True, order=True)
class Import:
    """One import statement's edge: ``importer`` (line ``line``) reads ``imported``, a module of ours."""

    importer: str
    imported: str
    line: int
    in_function: bool

    def __str__(self) -> str:
        where = " (inside a function)" if self.in_function else ""
        return f"{self.importer} -> {self.imported}  ({MODULES[self.importer].relative_to(REPO)}:{self.line}){where}"


def _resolved(name: str) -> str | None:
    """The module that importing ``name`` names: itself, or the longest prefix of it that is a module of ours."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _named(node: ast.Import | ast.ImportFrom, importer: str) -> list[str]:
    """Every full name an import statement reads, ours or not."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = importer.split(".") if MODULES[importer].name == "__init__.py" else importer.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, *([base] if base else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _statements(module: str) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """The module's import statements, each with whether it is inside a function."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(MODULES[module].read_text(encoding="utf-8")), False)
    return found


def imports_of(module: str) -> tuple[set[str], set[str]]:
    """(names read at the module's top level, names read inside its functions): full dotted names."""
    top: set[str] = set()
    inner: set[str] = set()
    for node, in_function in _statements(module):
        (inner if in_function else top).update(_named(node, module))
    return top, inner


@cache
def edges() -> frozenset[Import]:
    """Every import of one module of ours by another, wherever it is written (read once, for every test)."""
    return frozenset({
        Import(module, imported, node.lineno, in_function)
        for module in MODULES
        for node, in_function in _statements(module)
        for name in _named(node, module)
        if (imported := _resolved(name)) and imported != module
    })


def import_graph(modules: set[str] | None = None) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> the modules of ours it imports at its top level, module -> those it imports in its functions)."""
    chosen = PIPELINE if modules is None else modules
    top: dict[str, set[str]] = {m: set() for m in chosen}
    inner: dict[str, set[str]] = {m: set() for m in chosen}
    for edge in edges():
        if edge.importer in chosen:
            (inner if edge.in_function else top)[edge.importer].add(edge.imported)
    return top, inner


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan), each sorted: every import circle in one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(found)


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def folder_of(module: str) -> str:
    """The top-level folder of ``agentsearch`` a module is in (``api`` for ``agentsearch.api.routes.jobs``)."""
    return module.split(".")[1]


def layer_of(module: str) -> str:
    """The package of ``src/agentsearch/pipeline/`` a module is in (``agentsearch.pipeline.job`` for
    ``agentsearch.pipeline.job.answer.extractive``)."""
    return ".".join(module.split(".")[:3])


def upward(rank, edges_: Iterable[Import]) -> list[str]:
    """The imports whose importer ranks below what it imports, each named with the two ranks' names."""
    found = []
    for edge in sorted(edges_):
        low, high = rank(edge.importer), rank(edge.imported)
        if low is not None and high is not None and high[0] > low[0]:
            found.append(f"{edge}: {low[1]} imports {high[1]}, above it")
    return found


def _rank_in(order: tuple[str, ...], unit):
    def rank(module: str) -> tuple[int, str] | None:
        name = unit(module)
        return (order.index(name), name) if name in order else None
    return rank


def _failure(rule: str, offending: list[str]) -> str:
    return f"{len(offending)} import(s) break the rule: {rule}\n  " + "\n  ".join(offending)


def test_every_folder_and_every_package_of_the_pipeline_has_its_place_in_the_order():
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} - {"examples"}
    assert not [p.name for p in REPO.iterdir() if (p / "__init__.py").exists() and p.name != "tests"], (
        "a top-level package beside src/agentsearch")
    assert folders <= set(FOLDERS), f"a top-level package not in FOLDERS: {sorted(folders - set(FOLDERS))}"
    layers = {layer_of(m) for m in PIPELINE}
    assert layers == set(PIPELINE_LAYERS), (
        f"packages of src/agentsearch/pipeline/ not in PIPELINE_LAYERS: {sorted(layers - set(PIPELINE_LAYERS))}; "
        f"named but gone: {sorted(set(PIPELINE_LAYERS) - layers)}")


def test_no_folder_imports_a_folder_above_it():
    offending = upward(_rank_in(FOLDERS, folder_of), edges())
    assert not offending, _failure("a folder imports only the folders before it in " + " < ".join(FOLDERS), offending)


def test_no_package_of_the_pipeline_imports_one_above_it():
    offending = upward(_rank_in(PIPELINE_LAYERS, layer_of), {e for e in edges() if e.importer in PIPELINE})
    assert not offending, _failure("a package of the pipeline imports only the ones before it in PIPELINE_LAYERS",
                                   offending)


def test_pipeline_has_no_import_circle_at_module_level():
    top, _ = import_graph()
    assert circles(top) == []


def test_imports_inside_functions_close_no_circle_either():
    top, inner = import_graph()
    both = {m: top[m] | inner[m] for m in top}
    assert circles(both) == []


def test_pipeline_imports_no_framework():
    used = sorted(
        f"{module} -> {name}"
        for module in PIPELINE
        for name in set().union(*imports_of(module))
        if name.split(".")[0] in FRAMEWORKS
    )
    assert not used, _failure("src/agentsearch/pipeline/ imports no framework (" + ", ".join(FRAMEWORKS) + ")", used)


def test_agents_metrics_tracing_and_quotas_stand_below_the_job():
    offending = [
        f"{edge}: runs without a job, imports the job"
        for edge in sorted(edges())
        if _within(edge.importer, BELOW_THE_JOB) and _within(edge.imported, ("agentsearch.pipeline.job",))
    ]
    assert not offending, _failure("agents, metrics, tracing and quotas stand below the job", offending)


def test_the_graph_sees_what_it_should():
    # The reading itself: known edges at the top level, some inside functions, a dotted name resolved, and an upward
    # import made up here named with its line and its rule.
    top, inner = import_graph()
    assert "agentsearch.pipeline.records.agent_runs" in top["agentsearch.pipeline.agents.runner"]
    assert "agentsearch.pipeline.agents.base" in top["agentsearch.pipeline.agents.runner"]
    assert any(inner.values()) and len(PIPELINE) > 100
    known = ("api.app", "worker.app", "cli.serve", "bench.common", "devstack.stack")
    assert {f"agentsearch.{m}" for m in known} <= set(MODULES)
    reranker = "agentsearch.pipeline.agents.builtin.reranker"
    assert _resolved(f"{reranker}.Reranker") == reranker
    made_up = Import("agentsearch.pipeline.refusal", "agentsearch.pipeline.job.submit", 7, True)
    assert upward(_rank_in(PIPELINE_LAYERS, layer_of), {made_up}) == [
        "agentsearch.pipeline.refusal -> agentsearch.pipeline.job.submit  (src/agentsearch/pipeline/refusal.py:7) "
        "(inside a function): "
        "agentsearch.pipeline.refusal imports agentsearch.pipeline.job, above it"]
    made_up = Import("agentsearch.worker.app", "agentsearch.cli.serve", 3, False)
    assert upward(_rank_in(FOLDERS, folder_of), {made_up}) == [
        "agentsearch.worker.app -> agentsearch.cli.serve  (src/agentsearch/worker/app.py:3): "
        "worker imports cli, above it"]



# A module a reader takes in at one sitting: past this, it holds more than one noun.
LONGEST_MODULE_LINES = 450


def test_no_module_is_longer_than_a_sitting():
    lines = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    long = {name: n for name, n in lines.items() if n > LONGEST_MODULE_LINES}
    assert not long, f"modules over {LONGEST_MODULE_LINES} lines: {long}"


if __name__ == "__main__":
    every = edges()
    for line in [*upward(_rank_in(FOLDERS, folder_of), every),
                 *upward(_rank_in(PIPELINE_LAYERS, layer_of), {e for e in every if e.importer in PIPELINE})]:
        print(line)
    graph_top, graph_inner = import_graph()
    print("top level:", circles(graph_top) or "no circle")
    print("with imports inside functions:", circles({m: graph_top[m] | graph_inner[m] for m in graph_top}) or "none")
