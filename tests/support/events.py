"""A job's server-sent events as a test reads them: ``GET /v1/jobs/{id}/events`` until the stream ends.

Usage::

    events = read_events(http, job_id)                      # [(arrived_at, "stage", {...}), ..., (t, "done", {...})]
    read_events(http, job_id, on_event=lambda events: ...)  # called after each event, with all so far
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

Event = tuple[float, str, dict]


def read_events(http: httpx.Client, job_id: str, on_event: Callable[[list[Event]], None] | None = None,
                timeout_s: float | None = None) -> list[Event]:
    """Each event with the monotonic time it arrived, its name and its data, until ``done`` or the stream's end
    (an ``error`` event ends it too)."""
    events: list[Event] = []
    options = {} if timeout_s is None else {"timeout": timeout_s}
    with http.stream("GET", f"/v1/jobs/{job_id}/events", **options) as stream:
        assert stream.status_code == 200, stream.read()
        name = ""
        for line in stream.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((time.monotonic(), name, json.loads(line[6:])))
                if on_event is not None:
                    on_event(events)
                if name == "done":
                    break
    return events
