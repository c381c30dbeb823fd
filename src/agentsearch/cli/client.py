"""A small HTTP client for the API: what ``ingest``, ``search`` and ``demo`` send, and the errors they report.

Usage::

    client = ApiClient("http://127.0.0.1:8000", api_key)
    collection = client.ensure_collection("docs")
    client.add_documents(collection["id"], documents)
    client.upload_files(collection["id"], [(Path("q4.pdf"), "q4")])   # parsed by the workers
    job = client.wait_job(client.submit(collection["id"], "solar output"))
    for event, data in client.events(job_id):   # the job's server-sent events, until "done"
        ...

``agentsearch.cli.session.api_session`` gives one connected to the configured API, or to one it starts in this process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

TERMINAL = ("succeeded", "failed", "cancelled")
# Half the API's default request limit (AGENTSEARCH_MAX_REQUEST_BYTES), so a batch of long documents still fits.
BATCH_BYTES = 4 * 1024 * 1024
# A request refused for the rate limit (429 with Retry-After) is sent again after the wait the API names, this many
# times, if the wait is no longer than this; a longer one is reported.
RATE_LIMIT_RETRIES = 5
RATE_LIMIT_LONGEST_WAIT_S = 60.0


class ApiError(RuntimeError):
    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = response.text
        if isinstance(detail, list):
            detail = "; ".join(f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}" for d in detail)
        return cls(f"HTTP {response.status_code}: {detail}", response.status_code)


class ApiClient:
    def __init__(self, base_url: str, api_key: str, timeout_s: float = 30.0) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=timeout_s, headers={"Authorization": f"Bearer {api_key}"})

    def _call(self, method: str, path: str, **kwargs) -> Any:
        response = self.http.request(method, path, **kwargs)
        for _ in range(RATE_LIMIT_RETRIES):
            # Past the user's rate limit nothing was done: the same request is sent again when the API says.
            wait_s = _retry_after(response)
            if wait_s is None:
                break
            time.sleep(wait_s)
            response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        return response.json()

    def ensure_collection(self, name: str) -> dict:
        """The collection ``name`` names (``team/name``: a team's), made when missing (a team's by its admin)."""
        found = self.find_collection(name)
        if found is not None:
            return found
        team_name, _, plain = name.rpartition("/")
        if not team_name:
            return self._call("POST", "/v1/collections", json={"name": name})
        teams = [t for t in self._call("GET", "/v1/teams") if t["name"] == team_name]
        if not teams:
            raise ApiError(f"you are in no team named {team_name!r}", 404)
        return self._call("POST", "/v1/collections", json={"name": plain, "team_id": teams[0]["id"]})

    def find_collection(self, name: str) -> dict | None:
        """The collection ``name`` names: ``team/name`` a team's; a plain name the caller's own, or the one team
        collection of that name (several: refused, naming each as ``team/name``)."""
        found = self._call("GET", "/v1/collections", params={"name": name})
        if len(found) > 1:
            named = ", ".join(f"{c['team']}/{c['name']}" for c in found)
            raise ApiError(f"{len(found)} team collections are named {name!r} ({named}); name one as TEAM/NAME", 409)
        return found[0] if found else None

    def add_documents(self, collection_id: str, documents: list[dict], batch: int = 256,
                      batch_bytes: int = BATCH_BYTES) -> int:
        """Send documents in requests of at most ``batch`` documents and about ``batch_bytes`` of JSON.

        Check them first (``agentsearch.pipeline.ingestion.files.read_documents`` does): a request refused after earlier
        ones were accepted leaves those stored; sending the fixed list again replaces them by id.
        """
        accepted = 0
        for chunk in _batches(documents, batch, batch_bytes):
            accepted += self._call("POST", f"/v1/collections/{collection_id}/documents",
                                   json={"documents": chunk})["accepted"]
        return accepted

    def upload_files(self, collection_id: str, files: list[tuple[Path, str]], access: dict | None = None) -> dict:
        """Send files (each with its document's id) in one upload, found by the groups of ``access`` when given;
        the answer lists the documents taken and the files refused with their reasons."""
        return self.upload_contents(collection_id, [(path.name, path.read_bytes(), document_id)
                                                    for path, document_id in files], access)

    def upload_contents(self, collection_id: str, files: list[tuple[str, bytes, str]],
                        access: dict | None = None) -> dict:
        """``upload_files`` of files already read, each as ``(name, bytes, document id)``: the request's length is
        that of the bytes read, whatever the files on disk do meanwhile."""
        parts = [("files", (name, data)) for name, data, _ in files]
        form: dict = {"document_ids": [document_id for _, _, document_id in files]}
        if access is not None:
            form["access"] = json.dumps(access)
        return self._call("POST", f"/v1/collections/{collection_id}/files", files=parts, data=form)

    def documents(self, collection_id: str) -> list[dict]:
        """Every document of the collection, as the listing gives them (without their text)."""
        found: list[dict] = []
        while True:
            page = self._call("GET", f"/v1/collections/{collection_id}/documents",
                              params={"limit": 1000, "offset": len(found)})
            found.extend(page["items"])
            if not page["items"] or len(found) >= page["total"]:
                return found

    def sources(self, collection_id: str, method: str = "GET", path: str = "", **kwargs) -> Any:
        """A call to the collection's sources (``path``: ``/{source_id}``, ``/{source_id}/runs``, or none)."""
        return self._call(method, f"/v1/collections/{collection_id}/sources{path}", **kwargs)

    def delete_document(self, collection_id: str, document_id: str) -> None:
        self._call("DELETE", f"/v1/collections/{collection_id}/documents/{quote(document_id, safe='')}")

    def wait_indexed(self, collection_id: str, timeout_s: float = 600.0, on_progress=None) -> dict:
        """The collection once no document is pending. ``timeout_s`` bounds a wait in which no document finished,
        not the whole wait: a large file set on a busy machine takes as long as it takes while it moves, and the
        command gives up only on ingestion that stalled."""
        deadline = time.monotonic() + timeout_s
        pending: int | None = None
        while True:
            collection = self._call("GET", f"/v1/collections/{collection_id}")
            if on_progress:
                on_progress(collection["documents"])
            now_pending = collection["documents"]["pending"]
            if now_pending == 0:
                return collection
            if pending is not None and now_pending < pending:
                deadline = time.monotonic() + timeout_s
            pending = now_pending
            if time.monotonic() > deadline:
                raise TimeoutError(f"{now_pending} documents still pending, none finished in the last "
                                   f"{timeout_s:.0f} s")
            time.sleep(0.5)

    def create_agent_config(self, **body) -> dict:
        return self._call("POST", "/v1/agent-configs", json=body)

    def set_collection_agents(self, collection_id: str, agents: list[dict]) -> dict:
        return self._call("PUT", f"/v1/collections/{collection_id}/agents", json={"agents": agents})

    def submit(self, collection_id: str, query: str, **options) -> str:
        body = {"collection_id": collection_id, "query": query, **{k: v for k, v in options.items() if v is not None}}
        return self._call("POST", "/v1/search", json=body)["job_id"]

    def job(self, job_id: str) -> dict:
        return self._call("GET", f"/v1/jobs/{job_id}")

    def wait_job(self, job_id: str, timeout_s: float = 600.0, poll_s: float = 0.2) -> dict:
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.job(job_id)
            if job["status"] in TERMINAL:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job['status']} after {timeout_s:.0f} s")
            time.sleep(poll_s)

    def events(self, job_id: str, timeout_s: float = 600.0) -> Iterator[tuple[str, dict]]:
        """The job's server-sent events as ``(event, data)``, as the API sends them, until ``done``."""
        timeout = httpx.Timeout(self.http.timeout.connect, read=timeout_s)
        with self.http.stream("GET", f"/v1/jobs/{job_id}/events", timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                raise ApiError.from_response(response)
            name, data = "message", []
            for line in response.iter_lines():
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:
                    yield name, json.loads("\n".join(data))
                    if name == "done":
                        return
                    name, data = "message", []

    def close(self) -> None:
        self.http.close()


def _retry_after(response: httpx.Response) -> float | None:
    """How long to wait before sending a refused request again: a 429 that names a short wait; None otherwise."""
    if response.status_code != 429:
        return None
    try:
        wait_s = float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None
    return wait_s if 0 <= wait_s <= RATE_LIMIT_LONGEST_WAIT_S else None


def _batches(documents: list[dict], most: int, most_bytes: int) -> Iterator[list[dict]]:
    batch: list[dict] = []
    size = 0
    for doc in documents:
        doc_size = len(json.dumps(doc, ensure_ascii=False).encode())
        if batch and (len(batch) >= most or size + doc_size > most_bytes):
            yield batch
            batch, size = [], 0
        batch.append(doc)
        size += doc_size
    if batch:
        yield batch
