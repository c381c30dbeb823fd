"""Log lines that say which job, task and agent they belong to, as text or as JSON.

The ids live in context variables: the Celery task binds ``job_id`` and ``task_id`` for its whole run, the runner
binds ``agent_id`` around each agent call, and every record logged inside (by any logger) carries them.

Usage::

    configure_logging("json", "INFO")                  # once per process (API start, Celery's setup_logging)
    with log_context(job_id="j1", task_id="t1"):
        with log_context(agent_id="translator"):
            logging.getLogger("x").info("calling the endpoint")
    # {"time": "...", "level": "INFO", "logger": "x", "message": "calling the endpoint",
    #  "job_id": "j1", "task_id": "t1", "agent_id": "translator", "trace_id": null}

    restore = push_context(job_id="j1")                # when entry and exit are two callbacks (Celery signals)
    restore()
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TextIO

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter

CONTEXT_FIELDS = ("job_id", "task_id", "agent_id")

_ids: dict[str, ContextVar[str | None]] = {
    name: ContextVar(f"agentsearch_{name}", default=None) for name in CONTEXT_FIELDS
}


def current_ids() -> dict[str, str | None]:
    return {name: var.get() for name, var in _ids.items()}


def push_context(**ids: str | None) -> Callable[[], None]:
    """Bind ids in the current context; the returned function restores what was bound before."""
    unknown = set(ids) - set(CONTEXT_FIELDS)
    if unknown:
        raise ValueError(f"unknown log context fields: {sorted(unknown)}")
    tokens = [(_ids[name], _ids[name].set(value)) for name, value in ids.items()]

    def restore() -> None:
        for var, token in reversed(tokens):
            var.reset(token)

    return restore


@contextmanager
def log_context(**ids: str | None) -> Iterator[None]:
    restore = push_context(**ids)
    try:
        yield
    finally:
        restore()


class ContextFilter(logging.Filter):
    """Copies the bound ids (and the current trace id, to find the trace of a log line) onto every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, var in _ids.items():
            # An id passed explicitly with ``extra=`` wins over the bound one.
            if getattr(record, name, None) is None:
                setattr(record, name, var.get())
        span_context = trace.get_current_span().get_span_context()
        record.trace_id = format(span_context.trace_id, "032x") if span_context.is_valid else None
        return True


class TextFormatter(logging.Formatter):
    """One line per record, with the ids that are bound appended in brackets."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        ids = " ".join(f"{name}={value}" for name in CONTEXT_FIELDS if (value := getattr(record, name, None)))
        if not ids:
            return line
        first, newline, rest = line.partition("\n")  # keep a traceback below the bracketed ids
        return f"{first} [{ids}]{newline}{rest}"


# Celery's task lines pass the task's arguments and return value as ``extra={"data": ...}``: the job state, twice
# over (the message already quotes it), with the user's query and document text in it.
_CELERY_BULK = ("args", "kwargs", "return_value")


class _JsonFormatter(JsonFormatter):
    def process_log_record(self, log_data: dict[str, Any], /) -> dict[str, Any]:
        data = log_data.get("data")
        if isinstance(data, dict) and str(log_data.get("logger", "")).startswith("celery."):
            log_data["data"] = {k: v for k, v in data.items() if k not in _CELERY_BULK}
        return super().process_log_record(log_data)


def json_formatter() -> JsonFormatter:
    # Extra attributes of a record (the ids, anything passed with ``extra=``) become fields of their own.
    return _JsonFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
    )


_HANDLER_MARK = "_agentsearch_handler"


def configure_logging(log_format: str, level: str | int, stream: TextIO | None = None) -> logging.Handler:
    """Install one handler on the root logger; idempotent (replaces the handler an earlier call installed)."""
    if log_format not in ("text", "json"):
        raise ValueError(f"log format must be text or json, not {log_format!r}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(json_formatter() if log_format == "json" else TextFormatter())
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
