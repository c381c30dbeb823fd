"""``agentsearch sources``: a collection's sources (web sites, feeds, repositories, mailboxes, drives, buckets)
through the API, and the operator's rotation of the key their credentials are sealed with.

Usage::

    agentsearch sources add web --collection handbook --url https://example.org/docs/ --schedule 3600
    agentsearch sources add git --collection handbook --config '{"url": "https://git.example.org/h.git"}'
    agentsearch sources add web --collection intranet --url https://intra.example.org/ --username me --password-prompt
    agentsearch sources add mail --collection support/mail --config '{"host": "imap.example.org", "username": "desk",
        "folders": ["INBOX", "HR"], "groups": {"HR": "hr"}}' --password-prompt
    agentsearch sources add objects --collection reports --config '{"bucket": "r", "access_key": "AK"}' \
        --secret-prompt secret_key
    agentsearch sources list --collection handbook [--json]     # each source, its last run and its next
    agentsearch sources run SOURCE_ID --collection handbook --wait   # a run now; its counts when it ends
    agentsearch sources remove SOURCE_ID --collection handbook  # the source and the documents it brought
    agentsearch sources rotate-key                              # credentials sealed again with AGENTSEARCH_SOURCES_KEY
"""

from __future__ import annotations

import json
import time

import click

from agentsearch.cli.client import ApiClient, ApiError
from agentsearch.cli.errors import fail
from agentsearch.cli.session import api_session
from agentsearch.pipeline.platform.settings import get_settings

ENDED = ("succeeded", "failed", "skipped")


@click.group()
def sources() -> None:
    """A collection's sources: where its documents come from, kept in step by runs."""


def _collection(client: ApiClient, name: str) -> str:
    found = client.find_collection(name)
    if found is None:
        fail(f"no collection named {name!r}")
    return found["id"]


def _counts(run: dict) -> str:
    counts = ", ".join(f"{n} {k}" for k, n in run["documents"].items())
    errors = "".join(f"\n  {e}" for e in run["errors"])
    return f"run {run['id']} {run['status']}: {counts}{errors}"


@sources.command("add")
@click.argument("kind")
@click.option("--collection", "collection_name", required=True,
              help="Collection name, TEAM/NAME for a team's (created when missing).")
@click.option("--url", default=None, help="The site, feed or repository (the config's url).")
@click.option("--branch", default=None, help="A repository's branch.")
@click.option("--config", "config_json", default=None, help="The kind's config as JSON (docs/sources.md).")
@click.option("--username", default=None, help="The user the server asks for.")
@click.option("--password-prompt", is_flag=True, help="Ask for the password (never on the command line).")
@click.option("--secret-prompt", "secret_fields", multiple=True, metavar="FIELD",
              help="Ask for this credential of the config (secret_key, token, client_secret), never on the "
                   "command line.")
@click.option("--schedule", "schedule_s", type=int, default=None, help="Seconds between runs (default: when asked).")
def sources_add(kind: str, collection_name: str, url: str | None, branch: str | None, config_json: str | None,
                username: str | None, password_prompt: bool, secret_fields: tuple[str, ...],
                schedule_s: int | None) -> None:
    """Add a source to a collection: web, feed, git, mail, drive, objects, confluence, slack, notion, google_drive or
    sharepoint."""
    try:
        config = json.loads(config_json) if config_json else {}
    except json.JSONDecodeError as exc:
        fail(f"--config: not JSON ({exc.msg})")
    config.update({k: v for k, v in (("url", url), ("branch", branch), ("username", username)) if v is not None})
    if password_prompt:
        config["password"] = click.prompt("password", hide_input=True)
    for field in secret_fields:
        config[field] = click.prompt(field, hide_input=True)
    with api_session(get_settings()) as client:
        try:
            row = client.sources(client.ensure_collection(collection_name)["id"], "POST",
                                 json={"kind": kind, "config": config, "schedule_s": schedule_s})
        except ApiError as exc:
            fail(str(exc))
    click.echo(f"added {row['kind']} source {row['id']}")


@sources.command("list")
@click.option("--collection", "collection_name", required=True)
@click.option("--json", "as_json", is_flag=True, help="The API's answer as JSON.")
def sources_list(collection_name: str, as_json: bool) -> None:
    """The collection's sources, each with its last run and its next."""
    with api_session(get_settings()) as client:
        items = client.sources(_collection(client, collection_name))["items"]
    if as_json:
        click.echo(json.dumps(items, indent=2, default=str))
        return
    for row in items:
        target = row["config"].get("url", "")
        last = _counts(row["last_run"]) if row["last_run"] else "never run"
        click.echo(f"{row['id']}  {row['kind']:5} {target}  next: {row['next_run_at'] or 'when asked'}\n  {last}")


@sources.command("run")
@click.argument("source_id")
@click.option("--collection", "collection_name", required=True)
@click.option("--wait", is_flag=True, help="Wait until the run ends and print its counts.")
@click.option("--timeout", "timeout_s", type=float, default=600.0)
def sources_run(source_id: str, collection_name: str, wait: bool, timeout_s: float) -> None:
    """Run a source now."""
    with api_session(get_settings()) as client:
        try:
            collection_id = _collection(client, collection_name)
            run = client.sources(collection_id, "POST", f"/{source_id}/runs")
            deadline = time.monotonic() + timeout_s
            while wait and run["status"] not in ENDED:
                if time.monotonic() > deadline:
                    fail(f"run {run['id']} still {run['status']} after {timeout_s:g} s")
                time.sleep(0.3)
                runs = client.sources(collection_id, "GET", f"/{source_id}/runs")["items"]
                run = next(r for r in runs if r["id"] == run["id"])
        except ApiError as exc:
            fail(str(exc))
    click.echo(_counts(run) if wait else f"run {run['id']} queued")
    if run["status"] == "failed":
        raise SystemExit(1)


@sources.command("remove")
@click.argument("source_id")
@click.option("--collection", "collection_name", required=True)
def sources_remove(source_id: str, collection_name: str) -> None:
    """Remove a source and the documents it brought."""
    with api_session(get_settings()) as client:
        try:
            gone = client.sources(_collection(client, collection_name), "DELETE", f"/{source_id}")
        except ApiError as exc:
            fail(str(exc))
    click.echo(f"removed source {source_id} and its {gone['removed']} document(s)")


@sources.command("rotate-key")
def sources_rotate_key() -> None:
    """Seal every source's credentials again with AGENTSEARCH_SOURCES_KEY (the old key in
    AGENTSEARCH_SOURCES_PREVIOUS_KEYS until this ran); no source is read."""
    from agentsearch.cli.database import operator_database
    from agentsearch.pipeline.sources.credentials import NO_KEY, CredentialBox, rotate

    box = CredentialBox.of(get_settings())
    if box is None:
        fail(NO_KEY)
    try:
        done = rotate(operator_database(), box)
    except ValueError as exc:
        fail(str(exc))
    click.echo(f"credentials of {done} source(s) sealed with the current key")
