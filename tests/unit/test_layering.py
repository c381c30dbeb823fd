"""The layers of ``pipeline/`` as its imports draw them: no import circle, no framework, agents below the job.

The graph is read from the source with ``ast``, nothing imported: a module's imports at its top level (those under
``if TYPE_CHECKING:`` too, since a circle of types is still a circle to draw) and, apart, the ones inside its
functions. ``from pipeline.x import name`` is an edge to ``pipeline.x.name`` when that is a module, else to
``pipeline.x``.

Usage::

    .venv/bin/pytest -q tests/unit/test_layering.py
    .venv/bin/python tests/unit/test_layering.py          # the graph's circles, top level and inside functions
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipeline"
FRAMEWORKS = ("celery", "fastapi", "starlette", "kombu")
# What must run without a job: the agent machinery and the built-in agents, the metrics and the traces they write,
# and the quotas a submission checks. They read the agent records (pipeline.agents.records) and refusals
# (pipeline.refusal), never the job's state.
BELOW_THE_JOB = ("pipeline.agents", "pipeline.observability.metrics", "pipeline.observability.tracing",
                 "pipeline.security.quotas")
# The layers under a job, and the ones that run it: nothing of the first imports anything of the second (README,
# "Where things are").
LOWER = ("pipeline.documents", "pipeline.text", "pipeline.refusal", "pipeline.platform", "pipeline.parsing",
         "pipeline.retrieval", "pipeline.security", "pipeline.observability", "pipeline.agents")
UPPER = ("pipeline.job", "pipeline.agentic", "pipeline.webhooks", "pipeline.services", "pipeline.eval",
         "pipeline.operations")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PIPELINE.rglob("*.py")}


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


def imports_of(module: str) -> tuple[set[str], set[str]]:
    """(names read at the module's top level, names read inside its functions): full dotted names."""
    top: set[str] = set()
    inner: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                (inner if in_function else top).update(_named(child, module))
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, nested)

    visit(ast.parse(MODULES[module].read_text(encoding="utf-8")), False)
    return top, inner


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> the modules of ours it imports at its top level, module -> those it imports in its functions)."""
    top: dict[str, set[str]] = {}
    inner: dict[str, set[str]] = {}
    for module in MODULES:
        names_top, names_inner = imports_of(module)
        top[module] = {m for n in names_top if (m := _resolved(n)) and m != module}
        inner[module] = {m for n in names_inner if (m := _resolved(n)) and m != module}
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


def test_pipeline_has_no_import_circle_at_module_level():
    top, _ = import_graph()
    assert circles(top) == []


def test_imports_inside_functions_close_no_circle_either():
    top, inner = import_graph()
    both = {m: top[m] | inner[m] for m in MODULES}
    assert circles(both) == []


def test_pipeline_imports_no_framework():
    used = {
        (module, name)
        for module in MODULES
        for name in set().union(*imports_of(module))
        if name.split(".")[0] in FRAMEWORKS
    }
    assert used == set()


def test_agents_metrics_tracing_and_quotas_stand_below_the_job():
    top, inner = import_graph()
    upward = {
        (module, imported)
        for module in MODULES
        if _within(module, BELOW_THE_JOB)
        for imported in top[module] | inner[module]
        if _within(imported, ("pipeline.job",))
    }
    assert upward == set()


def test_the_lower_layers_import_none_of_the_upper_ones():
    top, inner = import_graph()
    upward = {
        (module, imported)
        for module in MODULES
        if _within(module, LOWER)
        for imported in top[module] | inner[module]
        if _within(imported, UPPER)
    }
    assert upward == set()


def test_the_graph_sees_what_it_should():
    # The reading itself: known edges at the top level, some inside functions, a dotted name resolved.
    top, inner = import_graph()
    assert "pipeline.agents.records" in top["pipeline.job.state"]
    assert "pipeline.agents.base" in top["pipeline.agents.runner"]
    assert any(inner.values()) and len(MODULES) > 100
    assert _resolved("pipeline.agents.builtin.reranker.Reranker") == "pipeline.agents.builtin.reranker"


if __name__ == "__main__":
    graph_top, graph_inner = import_graph()
    print("top level:", circles(graph_top) or "no circle")
    print("with imports inside functions:", circles({m: graph_top[m] | graph_inner[m] for m in MODULES}) or "none")
