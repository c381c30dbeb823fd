"""``agentsearch.api`` reaches the worker side through one module, ``src/agentsearch/api/worker_side.py``: no other
module of the API imports ``agentsearch.worker``, so what the API needs of the queue's side is one list."""

from __future__ import annotations

import ast
from pathlib import Path

from agentsearch import api

API = Path(api.__file__).parent
DOOR = "worker_side.py"


def _imports_worker(tree: ast.AST) -> list[int]:
    """Lines importing ``agentsearch.worker`` or a module under it, at the top or inside a function."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(name == "agentsearch.worker" or name.startswith("agentsearch.worker.") for name in names):
            lines.append(node.lineno)
    return lines


def test_the_api_imports_the_worker_side_only_through_its_door():
    importers = {str(path.relative_to(API)): lines for path in sorted(API.rglob("*.py"))
                 if (lines := _imports_worker(ast.parse(path.read_text())))}
    assert DOOR in importers, "the door imports what the API needs of src/agentsearch/worker/"
    others = {name: lines for name, lines in importers.items() if name != DOOR}
    assert others == {}, f"import these from agentsearch.api.{DOOR.removesuffix('.py')} instead"


def test_the_check_sees_every_form_of_import():
    found = _imports_worker(ast.parse("import agentsearch.worker\nimport os, agentsearch.worker.app\n"
                                      "from agentsearch.worker.job_tasks import x\n"
                                      "def f():\n    from agentsearch.worker import webhooks\n"
                                      "from agentsearch.workers import y\nfrom .worker import z\nimport worker\n"))
    assert found == [1, 2, 3, 5]
