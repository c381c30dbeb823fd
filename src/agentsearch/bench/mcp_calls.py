"""What an MCP tool call costs over the API route it stands for, on a dev stack (docs/mcp.md quotes it).

The same calls three ways, one after the other, on one stack (the sample corpus, a prefork worker with two
processes): the API route with httpx, the tool over the API's ``/mcp`` (streamable HTTP, the ``mcp`` client SDK),
and the tool over stdio (``agentsearch mcp`` spawned with the stack's URL and key). Two calls: listing the
collections (``calls`` times), and a search without agents or cache waited for (``searches`` times). Medians and
90th percentiles; the stdio server's start to its first answer.

    agentsearch bench mcp [--calls 40] [--searches 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from agentsearch.devstack import BIN, REPO, DevStack

SAMPLE_CORPUS = REPO / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
QUERY = "What was Northwind Energy's revenue in Q4 2025?"


def _figures(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"median_ms": round(statistics.median(ordered) * 1000, 1),
            "p90_ms": round(ordered[int(len(ordered) * 0.9)] * 1000, 1), "n": len(ordered)}


async def _tool(client: Client, name: str, arguments: dict[str, Any], n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        result = await client.call_tool(name, arguments)
        times.append(time.perf_counter() - start)
        assert not result.is_error, result
    return times


def run(calls: int, searches: int) -> dict[str, Any]:
    with DevStack(Path(tempfile.mkdtemp(prefix="mcp-bench-")), workers=1, concurrency=2, user="mcp-bench") as stack:
        documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
        collection = stack.ingest("corpus", documents)
        search = {"collection_id": collection, "query": QUERY, "agents": [], "use_cache": False}
        tool_search = {"collection": collection, "query": QUERY, "agents": [], "use_cache": False, "wait_s": 60}
        out: dict[str, Any] = {}
        with stack.http() as http:
            for _ in range(4):  # both worker processes load the model before anything is timed
                http.post("/v1/search", params={"wait": 60}, json={**search, "query": "solar"})
            listed, searched = [], []
            for _ in range(calls):
                start = time.perf_counter()
                http.get("/v1/collections").raise_for_status()
                listed.append(time.perf_counter() - start)
            for _ in range(searches):
                start = time.perf_counter()
                response = http.post("/v1/search", params={"wait": 60}, json=search)
                assert response.status_code == 200, response.text
                searched.append(time.perf_counter() - start)
        out["api"] = {"list_collections": _figures(listed), "search": _figures(searched)}

        async def over_http() -> dict[str, Any]:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {stack.api_key}"},
                                      timeout=httpx2.Timeout(30, read=150))
            async with Client(streamable_http_client(f"{stack.api_url}/mcp", http_client=http)) as client:
                return {"list_collections": _figures(await _tool(client, "list_collections", {}, calls)),
                        "search": _figures(await _tool(client, "search", tool_search, searches))}

        async def over_stdio() -> dict[str, Any]:
            params = StdioServerParameters(command=str(BIN / "agentsearch"), args=["mcp"], env=stack.env,
                                           cwd=str(REPO))
            start = time.perf_counter()
            async with Client(stdio_client(params, errlog=tempfile.TemporaryFile("w+"))) as client:
                ready = time.perf_counter() - start
                return {"ready_s": round(ready, 2),
                        "list_collections": _figures(await _tool(client, "list_collections", {}, calls)),
                        "search": _figures(await _tool(client, "search", tool_search, searches))}

        out["mcp_http"] = asyncio.run(over_http())
        out["mcp_stdio"] = asyncio.run(over_stdio())
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--searches", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    figures = run(args.calls, args.searches)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
