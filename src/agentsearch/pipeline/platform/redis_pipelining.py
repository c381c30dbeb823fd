"""Round trips to Redis whose answers are read later, so that two of them cost one wait.

A job step makes a few round trips that do not depend on one another: the agent runner's writes (the cached output,
the lock's release, the metrics) go to the cache's Redis and the step ledger's write to the result backend's, and
the ledger's read is independent of the progress report to the database. Sent one after the other, each waits for
its answer before the next is sent; sent together, the waits overlap. On a busy machine every wait is also a wait
for a time slice, which made these waits most of an agent step's own cost.

Usage::

    read = send_commands(redis, [("HGET", "agentsearch:steps:j1", "answer")])   # sent now
    report_progress()                                                           # its own round trip meanwhile
    (raw,) = read()                                                             # then the answer: call it once

    with scope():                  # within it, ``send`` reads the answers of a pipeline when the block ends
        send(pipe)                 # the runner's writes: nothing depends on their answers
        ledger.put(job_id, ...)    # sent and waited for; the writes' answers arrive meanwhile
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import redis
from redis.client import Pipeline
from redis.exceptions import RedisError, ResponseError

log = logging.getLogger("agentsearch.redis")

# The open scope of this context: the thread that opened it and the reads it still has to make.
_scope: ContextVar[tuple[int, list[Callable[[], list[Any]]]] | None] = ContextVar("overlap_scope", default=None)


def send_commands(client: redis.Redis, commands: Sequence[Sequence[Any]]) -> Callable[[], list[Any]]:
    """Send ``commands`` at once on a connection of ``client``'s pool; the function returned reads their answers
    (in order, an error answer as its exception) and gives the connection back. It must be called exactly once.

    Raises ``RedisError`` when the commands cannot be sent; the read raises it when the answers cannot be read.
    """
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        connection.send_packed_command(connection.pack_commands([tuple(c) for c in commands]))
    except BaseException:
        connection.disconnect()
        pool.release(connection)
        raise

    def read() -> list[Any]:
        answers: list[Any] = []
        try:
            for _ in commands:
                try:
                    answers.append(connection.read_response())
                except ResponseError as exc:
                    answers.append(exc)
        except BaseException:
            connection.disconnect()  # answers may still be on the way: never handed out again as it is
            raise
        finally:
            pool.release(connection)
        return answers

    return read


@contextmanager
def scope() -> Iterator[None]:
    """Within the block, ``send`` (in this thread) leaves reading the answers to the block's end."""
    reads: list[Callable[[], list[Any]]] = []
    token = _scope.set((threading.get_ident(), reads))
    try:
        yield
    finally:
        _scope.reset(token)
        for read in reads:
            try:
                read()
            except RedisError as exc:
                log.debug("answers of writes sent earlier not read (%s: %s)", type(exc).__name__, exc)


def send(pipe: Pipeline) -> bool:
    """Send what was queued on ``pipe`` (writes whose answers nothing depends on); False when Redis could not take
    it. Within a ``scope`` opened by this thread the answers are read when it ends, else now. Another thread (an
    agent's, which may outlive the scope) always reads its own at once."""
    commands = [args for args, _options in pipe.command_stack]
    if not commands:
        return True
    try:
        read = send_commands(pipe, commands)
    except RedisError:
        return False
    opened = _scope.get()
    if opened is not None and opened[0] == threading.get_ident():
        opened[1].append(read)
        return True
    try:
        read()
    except RedisError:
        return False
    return True
