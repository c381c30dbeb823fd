"""A bare Celery task for the hop benchmark's raw chain, on the workers' own app.

Workers import it when ``AGENTSEARCH_WORKER_IMPORTS`` names this module, so the raw chain runs on the same Redis
and in the same worker processes as the jobs it is compared with.
"""

from __future__ import annotations

import time
from typing import Any

from agentsearch.worker.app import app

TASK = "bench.noop"


@app.task(name=TASK)
def noop(payload: dict[str, Any]) -> dict[str, Any]:
    # The one thing it does: stamp the time, so the last task of a chain tells when the chain ended.
    payload["at"] = time.time()
    return payload
