"""The command line's shape: the entry point, every command its docstring lists, ``python -m agentsearch``, and the
client's request batches."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from agentsearch import cli
from agentsearch.cli import main
from agentsearch.cli.client import _batches

REPO = Path(__file__).resolve().parents[3]


def test_the_entry_point_is_the_cli_package_main():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["agentsearch"] == "agentsearch.cli:main"


def test_every_command_the_docstring_lists_is_registered():
    listed = {line.split()[1] for line in cli.__doc__.splitlines() if line.strip().startswith("agentsearch ")}
    listed |= {"api", "worker", "beat", "flower", "migrate"}  # listed together on one line
    assert listed <= set(main.commands), listed - set(main.commands)
    assert set(main.commands["eval"].commands) == {"retrieval", "iterative", "answers", "followups", "formats",
                                                  "generate", "run"}


def test_python_dash_m_cli_runs_the_same_group():
    done = subprocess.run([sys.executable, "-m", "agentsearch", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Usage: python -m agentsearch" in done.stdout and "ingest" in done.stdout


def test_documents_go_in_batches_by_count_and_by_size():
    docs = [{"id": str(i), "text": "x" * 100} for i in range(5)]
    assert [len(b) for b in _batches(docs, 2, 10**6)] == [2, 2, 1]
    one = len(json.dumps(docs[0]).encode())
    assert [len(b) for b in _batches(docs, 100, 2 * one)] == [2, 2, 1]
    # A document larger than the byte limit still goes, alone.
    assert [len(b) for b in _batches(docs[:2], 100, 1)] == [1, 1]
