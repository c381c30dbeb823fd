"""Which API the client commands talk to: the one at AGENTSEARCH_API_URL, or one served from this process.

Usage::

    with api_session(get_settings()) as client:     # an ApiClient, whichever API it reaches
        collection = client.ensure_collection("docs")

    with local_server() as (url, key):               # the in-process API alone, and a key of the local user
        ...
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

from agentsearch.cli.client import ApiClient, ApiError
from agentsearch.pipeline.platform.ports import free_port
from agentsearch.pipeline.platform.settings import Settings


@contextmanager
def local_server(host: str = "127.0.0.1", port: int | None = None) -> Iterator[tuple[str, str]]:
    """Serve the API from a thread of this process (embedded mode: the Celery worker threads come with it).

    Yields the URL and a key of the local user that lives only as long as the server.
    """
    # Imported here, not above: the API (FastAPI, the services, the worker threads) takes seconds to load, and only
    # a command without AGENTSEARCH_API_URL needs it.
    import uvicorn

    from agentsearch.api.app import create_app
    from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
    from agentsearch.pipeline.security.users import UserStore

    port = port or free_port(host)
    app = create_app()
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="agentsearch-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the in-process API did not start")
        time.sleep(0.05)
    users = UserStore(app.state.services.db)
    key = users.issue_key_for(DEFAULT_USER_ID, label="local session")
    interrupted = True
    try:
        yield f"http://{host}:{port}", key
        interrupted = False
    finally:
        users.delete_key(key)
        server.should_exit = True
        stop_serving(thread, notice_after_s=2.0 if interrupted else None)


def stop_serving(thread: threading.Thread, notice_after_s: float | None = 2.0) -> None:
    """Wait for the server thread to end: its shutdown stops the worker threads, which finish the tasks they run.

    Not bounded: leaving while an ingest task runs lets the interpreter's exit refuse Milvus Lite's in-process
    server new work while the task still waits on it (every upsert then ran to its gRPC deadline, and the command
    took minutes to end with a page of tracebacks). Queued tasks are dropped at once, so this waits for the few a
    worker thread holds. A command stopped early (Ctrl-C, a stalled wait) says so when that takes ``notice_after_s``;
    one that ended its work (``None``) stops quietly, however long a loaded machine takes to shut the threads down.
    """
    if notice_after_s is not None:
        thread.join(notice_after_s)
        if thread.is_alive():
            click.echo("stopping: finishing the work in flight", err=True)
    thread.join()


@contextmanager
def api_session(settings: Settings) -> Iterator[ApiClient]:
    if settings.api_url:
        if not settings.api_key:
            raise ApiError("AGENTSEARCH_API_URL is set but AGENTSEARCH_API_KEY is not: "
                           "create a key with `agentsearch users create NAME`")
        client = ApiClient(settings.api_url, settings.api_key)
        try:
            yield client
        finally:
            client.close()
        return
    with local_server() as (url, key):
        client = ApiClient(url, key)
        try:
            yield client
        finally:
            client.close()
