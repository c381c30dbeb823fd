"""agentsearch: distributed agentic search over a team's document collections.

The layers, lowest first (``tests/unit/test_layering.py`` holds the order)::

    agentsearch.pipeline    the work itself: agents, retrieval, the job's workflow, no framework
    agentsearch.migrations  the database schema's revisions
    agentsearch.worker      the workflow's steps as Celery tasks
    agentsearch.api         the HTTP API and the web console
    agentsearch.devstack    the deployment's processes on one machine
    agentsearch.bench       benchmarks of a running stack
    agentsearch.cli         the ``agentsearch`` command over all of them

docs/architecture.md is the map.
"""
