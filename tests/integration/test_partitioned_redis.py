"""The API with its Redis partitioned away: a port that takes no connection and answers nothing, as a Redis behind a
network partition looks (a listening socket whose queue is full, so the kernel drops every new SYN).

What it cannot do without Redis (put a job on the queues) answers 503 with ``Retry-After`` within a bound, and
writes nothing; what needs only the database still answers; readiness says 503 within the probes' timeout. Before,
a submission waited for as long as the partition lasted (docs/reliability.md, "Network partitions").
"""

from __future__ import annotations

import time

import httpx

from tests.integration.conftest import extra_api
from tests.support.black_hole import black_hole

REDIS_TIMEOUT_S = 1.0
# The rate limit counters' 0.5 s, the job cache's metrics (one Redis timeout), the chord's result subscription and
# its one reconnect (two more), with room for a loaded machine.
SUBMIT_BOUND_S = 0.5 + 3 * REDIS_TIMEOUT_S + 4.0


def test_the_api_answers_503_in_time_when_redis_is_partitioned_away(stack, collection, tmp_path):
    with black_hole() as port:
        silent = f"redis://127.0.0.1:{port}"
        env = {**stack.env, "AGENTSEARCH_BROKER_URL": f"{silent}/0", "AGENTSEARCH_RESULT_BACKEND": f"{silent}/1",
               "AGENTSEARCH_REDIS_URL": f"{silent}/2", "AGENTSEARCH_REDIS_TIMEOUT_S": str(REDIS_TIMEOUT_S)}
        with extra_api(env, tmp_path / "api.log") as url, \
                httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {stack.api_key}"}) as http:
            query = f"Submitted while Redis is away [{port}]"
            for _ in range(2):  # the first one also meets the job cache's metrics, the second one not
                started = time.monotonic()
                submitted = http.post("/v1/search", json={"collection_id": collection, "query": query,
                                                          "agents": ["executive_summary"], "use_cache": False})
                took = time.monotonic() - started
                assert submitted.status_code == 503, submitted.text
                assert submitted.headers["retry-after"] == "5"
                assert "job queue is unavailable" in submitted.json()["detail"]
                assert took < SUBMIT_BOUND_S, took

            started = time.monotonic()
            ready = http.get("/readyz")
            assert ready.status_code == 503 and ready.json()["checks"]["redis"] == "unavailable"
            assert time.monotonic() - started < 3.0

            listed = http.get("/v1/jobs", params={"limit": 5})
            assert listed.status_code == 200, listed.text

    # Taken back: no job row waits for a worker that never heard of it.
    assert stack.sql("SELECT count(*) FROM jobs WHERE query = %s", query)[0][0] == 0
