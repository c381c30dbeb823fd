"""A real OpenAI-compatible embeddings server on this machine: Infinity (``infinity-emb``) serving the packaged
all-MiniLM-L6-v2 weights from their local directory, no model hub.

Infinity pins older numpy, sentence-transformers, click and uvicorn than the project uses, so it lives in a virtual
environment of its own, ``.agentsearch/embedding-server/``, made from ``src/agentsearch/devstack/embedding-server.txt``
(every package pinned) with the project's pip, the CPU torch first. A stamp holding the pins' digest makes a second
``install`` free; changed pins install afresh. Two installs at once (two test runs) wait for each other.

Usage::

    .venv/bin/python -m agentsearch.devstack.embedding_server install     # `make embedding-server`; quick once done
    .venv/bin/python -m agentsearch.devstack.embedding_server serve --port 7997
    #   then AGENTSEARCH_EMBEDDING_URL=http://127.0.0.1:7997/v1

    with EmbeddingServer(workdir, api_key="k") as server:      # installs if needed, starts on a free port
        server.url                                             # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

from agentsearch.devstack.pinned_venv import installed as pinned_venv_installed, pinned_venv
from agentsearch.devstack.processes import REPO, LocalServer

REQUIREMENTS = Path(__file__).resolve().parent / "embedding-server.txt"
# The CPU build, from this machine's disk: any other torch specification may pull a multi-GB CUDA build.
TORCH = "torch==2.13.0"
VENV = REPO / ".agentsearch" / "embedding-server"
SERVED_MODEL = "all-MiniLM-L6-v2"
# Infinity answers on /health at the root and on /v1/embeddings with this prefix: the path TEI and vLLM serve too.
URL_PREFIX = "/v1"
START_TIMEOUT_S = 180


def _pins_digest() -> str:
    return hashlib.sha256(f"{TORCH}\n{REQUIREMENTS.read_text()}\n{sys.version_info[:2]}".encode()).hexdigest()


def installed(venv: Path = VENV) -> bool:
    return pinned_venv_installed(venv, _pins_digest())


def install(venv: Path = VENV, quiet: bool = True) -> Path:
    """Make (or keep) the server's virtual environment; the path of its ``infinity_emb`` command."""
    pinned_venv(venv, _pins_digest(), [[TORCH], ["-r", str(REQUIREMENTS)]], "embedding server", quiet)
    return venv / "bin" / "infinity_emb"


def model_directory(name: str = SERVED_MODEL) -> Path:
    from agentsearch.pipeline.retrieval.model_files import resolve_model_path  # the weights the project itself loads

    return resolve_model_path(name)


def server_env() -> dict[str, str]:
    """The server's environment: offline (no hub), no usage statistics, none of the project's own settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AGENTSEARCH_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", DO_NOT_TRACK="1", INFINITY_ANONYMOUS_USAGE_STATS="0")
    return env


class EmbeddingServer(LocalServer):
    """Infinity on 127.0.0.1, for as long as the ``with`` block lasts (``start``/``stop`` for drills)."""

    name = "embedding-server"
    start_timeout_s = START_TIMEOUT_S

    def __init__(self, workdir: Path, port: int | None = None, api_key: str | None = None,
                 venv: Path = VENV) -> None:
        super().__init__(workdir, port)
        self.venv, self.api_key = venv, api_key
        self.url = f"{self.root}{URL_PREFIX}"

    def command(self) -> list[str]:
        return [str(install(self.venv)), "v2", "--model-id", str(model_directory()), "--served-model-name",
                SERVED_MODEL, "--engine", "torch", "--device", "cpu", "--host", "127.0.0.1", "--port", str(self.port),
                "--url-prefix", URL_PREFIX,
                # Without optimum (not installed here), 0.0.77 fails at start looking for BetterTransformer.
                "--no-bettertransformer",
                # The warm-up only measures the model (tens of seconds on a busy 2-core machine); nothing needs it.
                "--no-model-warmup", *(["--api-key", self.api_key] if self.api_key else [])]

    def environment(self) -> dict[str, str]:
        return server_env()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["install", "serve"])
    parser.add_argument("--port", type=int, default=7997)
    parser.add_argument("--api-key", default=None)
    args = parser.parse_args()
    if args.action == "install":
        install()
        return
    server = EmbeddingServer(REPO / ".agentsearch" / "embedding-server-run", port=args.port, api_key=args.api_key)
    server.serve(f"AGENTSEARCH_EMBEDDING_URL={server.url}")


if __name__ == "__main__":
    main()
