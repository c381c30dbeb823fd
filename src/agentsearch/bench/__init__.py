"""Benchmarks of agentsearch (``make bench`` runs them all and writes BENCHMARKS.md at the repository root).

The package is installed with the project (pyproject's package list), so a script run by its path finds its
neighbours as ``agentsearch.bench.common``, ``agentsearch.bench.agents``, ... and the workers of a bench stack import
``agentsearch.bench.agents``::

    .venv/bin/python -m agentsearch.bench.suite --quick          # or: .venv/bin/python -m agentsearch.bench.suite
    --quick .venv/bin/agentsearch bench hop --agents 20 --jobs 30
"""
