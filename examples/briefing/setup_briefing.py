"""Set up the morning briefing of ``briefing.json`` on an agentsearch API: the collection, its feed sources (each
read every hour) and the profile set that runs every morning over what they brought, ending with a PDF report and
an e-mail draft of what is new since the last briefing.

Usage::

    AGENTSEARCH_API_URL=http://127.0.0.1:8000 AGENTSEARCH_API_KEY=... \\
        python examples/briefing/setup_briefing.py                       # or --spec my-briefing.json

    from setup_briefing import apply                                     # from code: any httpx.Client
    made = apply(http, json.loads(Path("briefing.json").read_text()))
    made["profile_set_id"]                                               # and "collection_id", "sources"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx

SPEC = Path(__file__).with_name("briefing.json")


def _ok(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        raise SystemExit(f"{response.request.method} {response.request.url.path}: {response.status_code} "
                         f"{response.text}")
    return response.json()


def apply(http: httpx.Client, spec: dict[str, Any]) -> dict[str, Any]:
    """The collection made (or the one of that name reused), each source added, the profile set made over it."""
    name = spec["collection"]["name"]
    existing = [c for c in _ok_list(http.get("/v1/collections")) if c["name"] == name and not c.get("team")]
    collection = existing[0] if existing else _ok(http.post("/v1/collections", json=spec["collection"]))
    sources = [_ok(http.post(f"/v1/collections/{collection['id']}/sources", json=source))
               for source in spec["sources"]]
    profile_set = _ok(http.post("/v1/profile-sets", json={**spec["profile_set"], "collection_id": collection["id"]}))
    return {"collection_id": collection["id"], "sources": [s["id"] for s in sources],
            "profile_set_id": profile_set["id"]}


def _ok_list(response: httpx.Response) -> list[dict[str, Any]]:
    if response.status_code >= 400:
        raise SystemExit(f"GET {response.request.url.path}: {response.status_code} {response.text}")
    return response.json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=SPEC, help="the briefing's JSON (default: briefing.json)")
    parser.add_argument("--api-url", default=os.environ.get("AGENTSEARCH_API_URL", "http://127.0.0.1:8000"))
    args = parser.parse_args()
    key = os.environ.get("AGENTSEARCH_API_KEY")
    if not key:
        sys.exit("set AGENTSEARCH_API_KEY to a key of the user the briefing is for")
    with httpx.Client(base_url=args.api_url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        made = apply(http, json.loads(args.spec.read_text()))
    print(json.dumps(made, indent=2))


if __name__ == "__main__":
    main()
