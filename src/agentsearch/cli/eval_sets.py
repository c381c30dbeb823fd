"""``agentsearch eval generate`` and ``eval run``: a collection's question set made from its documents, and its
quality measured on it, through the API (``src/agentsearch/api/routes/quality.py``).

Usage::

    agentsearch eval generate --collection handbook --size 50      # the set made anew (the LLM's, when configured)
    agentsearch eval generate --collection handbook --refresh      # only the questions of changed documents
    agentsearch eval run --collection handbook                     # hit@5, nDCG@10, gold span, supported, p50
"""

from __future__ import annotations

import click

from agentsearch.cli.client import ApiError
from agentsearch.cli.errors import fail
from agentsearch.cli.session import api_session
from agentsearch.pipeline.platform.settings import get_settings

# A run works within the API's request; the client waits for it a little past the API's own limit.
RUN_WAIT_MARGIN_S = 30.0
FIGURES = ("hit@5", "ndcg@10", "gold_span_rate", "supported_rate", "fallback_rate", "latency_p50_ms")


def _collection(client, name: str) -> dict:
    found = client.find_collection(name)
    if found is None:
        fail(f"no collection named {name!r}")
    return found


@click.command("generate")
@click.option("--collection", "collection_name", required=True, help="Collection name, TEAM/NAME for a team's.")
@click.option("--size", type=click.IntRange(1, 500), default=None, help="Questions (default: the service's).")
@click.option("--offline", is_flag=True, help="The offline cloze method even with an LLM configured.")
@click.option("--refresh", is_flag=True, help="Only replace the questions of documents changed since.")
def eval_generate(collection_name: str, size: int | None, offline: bool, refresh: bool) -> None:
    """Make a collection's question set from its own documents."""
    settings = get_settings()
    try:
        with api_session(settings) as client:
            collection = _collection(client, collection_name)
            path = f"/v1/collections/{collection['id']}/eval-sets"
            wait = settings.quality_gate_timeout_s + RUN_WAIT_MARGIN_S
            if refresh:
                counts = client._call("POST", f"{path}/refresh", timeout=wait)
                click.echo(f"{collection_name}: {counts['dropped']} questions of changed documents replaced by "
                           f"{counts['made']}")
                return
            body = {"llm": not offline, **({"size": size} if size else {})}
            made = client._call("POST", path, json=body, timeout=wait)
    except ApiError as exc:
        fail(str(exc))
    click.echo(f"{collection_name}: {made['questions']} questions from {made['documents']} documents "
               f"({made['method']}; {made['by_origin']['llm']} by the LLM, {made['by_origin']['cloze']} cloze)")


@click.command("run")
@click.option("--collection", "collection_name", required=True, help="Collection name, TEAM/NAME for a team's.")
def eval_run(collection_name: str) -> None:
    """Measure a collection on its question set (kept: the console's Quality panel charts them)."""
    settings = get_settings()
    try:
        with api_session(settings) as client:
            collection = _collection(client, collection_name)
            run = client._call("POST", f"/v1/collections/{collection['id']}/eval-runs",
                               timeout=settings.eval_run_timeout_s + RUN_WAIT_MARGIN_S)
    except ApiError as exc:
        fail(str(exc))
    figures = run["figures"]
    shown = "  ".join(f"{name} {'-' if figures.get(name) is None else figures[name]}" for name in FIGURES)
    click.echo(f"{collection_name}: {figures['questions']} questions ({run['status']})  {shown}")
