"""An artifact is served as a download a browser never renders as a page: ``attachment`` with its name quoted so
that no name breaks the header, and ``nosniff``. On the embedded app (``app`` and ``client`` in conftest.py), with
the job and its artifacts written straight to its database."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import pytest

from agentsearch.pipeline.agents.base import AgentArtifact
from agentsearch.pipeline.job.artifacts import ArtifactStore
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.security.users import UserStore
from tests.support.api_checks import new_collection

# Names an artifact can have: response agents take a file name from their config, and a registered tool's name
# for its result is taken as it is (src/agentsearch/pipeline/agents/builtin/mcp_tool.py).
NAMES = {
    "summary.txt": 'attachment; filename="summary.txt"',
    'final"; x=".html': "attachment; filename=\"final__ x__.html\"; filename*=UTF-8''final%22%3B%20x%3D%22.html",
    "报告.txt": "attachment; filename=\"__.txt\"; filename*=UTF-8''%E6%8A%A5%E5%91%8A.txt",
}


@pytest.fixture(scope="module")
def job_id(app, client) -> str:
    """A job of the client's user holding one artifact per name in ``NAMES``, stored as HTML could be."""
    services = app.state.services
    user_id = UserStore(services.db).authenticate(client.headers["Authorization"].removeprefix("Bearer "))
    collection_id = new_collection(client, "artifacts")
    job = uuid.uuid4()
    with services.db.session() as s:
        s.add(JobRow(id=job, user_id=user_id, collection_id=uuid.UUID(collection_id), query="q", status="running"))
    for name in NAMES:
        ArtifactStore.of(services).save(str(job), AgentArtifact(agent_id="mcp_tool", type="txt", filename=name,
                                                        content_type="text/plain", data=b"<script>alert(1)</script>"))
    with services.db.session() as s:
        s.get(JobRow, job).status = "succeeded"
    return str(job)


@pytest.mark.parametrize("name", list(NAMES))
def test_an_artifact_is_an_attachment_with_its_name_quoted_and_nosniff(client, job_id, name):
    """A name with a quote ended the header's value early; one outside Latin-1 could not be encoded (a 500)."""
    response = client.get(f"/v1/jobs/{job_id}/artifacts/{quote(name, safe='')}")
    assert response.status_code == 200, response.text
    assert response.content == b"<script>alert(1)</script>"
    assert response.headers["content-type"].startswith("text/plain")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-disposition"] == NAMES[name]
