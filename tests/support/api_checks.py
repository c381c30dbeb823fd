"""What the API tests check of an answer and of the database behind the embedded app (``app`` in
tests/unit/conftest.py).

Usage::

    assert locs(response) == [["body", "query"]]             # the fields a 422 names
    assert jobs_written(app) == 0                            # a refused request wrote no job
    collection_id = new_collection(client, "annual reports")
"""

from __future__ import annotations

import uuid

from sqlalchemy import func, select

from agentsearch.pipeline.platform.tables.jobs import JobRow


def locs(response) -> list[list]:
    return [err["loc"] for err in response.json()["detail"]]


def jobs_written(app) -> int:
    with app.state.services.db.session() as s:
        return s.scalar(select(func.count()).select_from(JobRow))


def new_collection(client, name: str) -> str:
    """A collection of the client's user, under a name no other test uses."""
    response = client.post("/v1/collections", json={"name": f"{name} {uuid.uuid4().hex[:8]}"})
    assert response.status_code == 201, response.text
    return response.json()["id"]
