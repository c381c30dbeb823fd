"""The ``agentsearch`` command line.

    agentsearch demo                                   ingest a sample corpus and run one search job end to end
    agentsearch api | worker | beat | flower | migrate run the services
    agentsearch ingest FILE --collection NAME          JSON Lines documents, or one file of any format parsed
    agentsearch sync DIR --collection NAME             a folder kept in step: new and changed files, removed ones
    agentsearch search "QUERY" --collection NAME [--agents a,b] [--wait] [--out DIR]
    agentsearch eval retrieval|answers ...             benchmark retrieval (BEIR) or answers (gold spans)
    agentsearch eval iterative ...                     iterative mode vs single-shot search (BEIR)
    agentsearch eval followups [--scifact DIR]         follow-up retrieval with and without the contextualizer
    agentsearch eval generate|run --collection NAME   a collection's own question set, its quality measured on it
    agentsearch agents list [--json]                   the registered agents
    agentsearch users create NAME | list | new-key NAME | revoke PREFIX    API users and their keys
    agentsearch users limits NAME [--searches-per-minute N ...] [--reset]   a user's rate limits and quotas
    agentsearch teams create NAME | add-member TEAM USER --role R | remove-member | list | show   teams, roles
    agentsearch tools add NAME --kind mcp|http ... | list | remove NAME     tools agent configs may name
    agentsearch sources add KIND --collection NAME --url URL | list | run ID --wait | remove ID | rotate-key
    agentsearch reindex [--collection NAME]            a collection's Milvus data rebuilt from the database
    agentsearch backup DIR | restore DIR [--database-url URL] [--reindex]   the database, with a manifest
    agentsearch retention run [--dry-run] [--json]     prune what is past its retention, or count what would go
    agentsearch audit [--team T] [--actor U] [--action A] [--since 2d] [--limit N] [--json]   the audit trail
    agentsearch bench hop --agents N --jobs M [--json OUT]          per-agent hop vs a raw Celery chain
    agentsearch bench default-job --queries N [--json OUT]          the uncached default job on SciFact
    agentsearch mcp                                    the MCP server on stdio (tools: search, get_job, ...)

``ingest`` and ``search`` talk to the API at AGENTSEARCH_API_URL with AGENTSEARCH_API_KEY; unset, they start one in
this process and act as the local user.

Where each command lives: ``src/agentsearch/cli/serve.py`` (api, worker, beat, flower, migrate),
``src/agentsearch/cli/documents.py`` (ingest), ``src/agentsearch/cli/folder_sync.py`` (sync),
``src/agentsearch/cli/sources.py``,
``src/agentsearch/cli/search.py``, ``src/agentsearch/cli/demo.py``, ``src/agentsearch/cli/eval.py``,
``src/agentsearch/cli/agents.py``, ``src/agentsearch/cli/users.py``, ``src/agentsearch/cli/teams.py``,
``src/agentsearch/cli/tools.py``, ``src/agentsearch/cli/audit.py``, ``src/agentsearch/cli/benchmarks.py`` (bench),
``src/agentsearch/cli/mcp.py`` (mcp), ``src/agentsearch/cli/reindex.py``, ``src/agentsearch/cli/backup.py`` (backup,
restore); the API client they share is ``src/agentsearch/cli/client.py`` with ``src/agentsearch/cli/session.py``. The
commands that may load the models in this process print their own lines and errors, not the libraries' bars and warnings
(``src/agentsearch/cli/quiet.py``).

A command imports what only it needs (SQLAlchemy and Alembic, the agents, the API, Celery, the benchmarks) when it
runs, not at the top of its module: so ``agentsearch --help``, ``search`` and ``ingest`` start in about 0.25 s, not
0.6 s or, with the API loaded, 2.5 s.

Usage::

    from agentsearch.cli import main      # the click group: the `agentsearch` entry point, `python -m agentsearch`
    CliRunner().invoke(main, ["agents", "list", "--json"])
"""

from __future__ import annotations

import click
from pydantic import ValidationError

from agentsearch.cli import (
    agents,
    audit,
    backup,
    demo,
    documents,
    folder_sync,
    mcp,
    reindex,
    retention,
    search,
    serve,
    sources,
    teams,
    tools,
    users,
)
from agentsearch.cli.benchmarks import bench_group
from agentsearch.cli.errors import fail
from agentsearch.cli.eval import eval_group
from agentsearch.cli.eval_sets import eval_generate, eval_run
from agentsearch.cli.quiet import QUIET_COMMANDS, quiet_libraries
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.settings_checks import settings_problem

__all__ = ["fail", "main"]


class _Commands(click.Group):
    """The command group, refusing settings that do not validate (``AGENTSEARCH_*`` variables) in one line per
    setting, named as it is set, rather than a traceback: ``api``, ``worker`` and the others read them first."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ValidationError as exc:
            if exc.title != Settings.__name__:
                raise
            fail(f"the settings are not valid:\n{settings_problem(exc)}")


@click.group(cls=_Commands)
@click.pass_context
def main(ctx: click.Context) -> None:
    """agentsearch: distributed agentic search."""
    if ctx.invoked_subcommand in QUIET_COMMANDS:
        quiet_libraries()  # before the command imports the libraries it quiets


for command in (serve.migrate, serve.api, serve.worker, serve.beat, serve.flower, documents.ingest, folder_sync.sync,
                search.search, demo.demo, eval_group, agents.agents, users.users, teams.teams, tools.tools,
                sources.sources, bench_group,
                mcp.mcp_server, retention.retention, reindex.reindex, audit.audit,
                backup.backup, backup.restore):
    main.add_command(command)
for subcommand in (eval_generate, eval_run):  # a collection's own question set, beside the benchmark evaluations
    eval_group.add_command(subcommand)
