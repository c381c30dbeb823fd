"""What the API process imports before it serves: its container's cold start is mostly imports, read from the image
on a host that may be busy, so a heavy library only some requests need is imported by those requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src"
# pymilvus imports pandas (half a second); the API makes no Milvus client until a request needs one. The MCP SDK
# (another half second) loads on the first /mcp request (src/agentsearch/api/mcp_server/mount.py). pyarrow and faiss
# are milvus-lite's, which the default image leaves out; torch and transformers are not in the image at all. Alembic
# (with Mako) migrates the schema only in embedded mode; feedparser reads a feed source's listing, in a worker; authlib
# and joserfc sign a user in through single sign-on, at the first sign-in.
NOT_AT_START = ("pymilvus", "pandas", "pyarrow", "faiss", "milvus_lite", "torch", "transformers", "onnxruntime", "mcp",
                "alembic", "mako", "feedparser", "authlib", "joserfc")


def test_the_api_app_is_made_without_the_heavy_libraries():
    code = ("import json, sys; from agentsearch.api.app import create_app; create_app(); "
            f"print(json.dumps([m for m in {list(NOT_AT_START)!r} if m in sys.modules]))")
    env = {**os.environ, "PYTHONPATH": str(SRC), "AGENTSEARCH_OTEL_EXPORTER": "none"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
