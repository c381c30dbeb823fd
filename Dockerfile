# syntax=docker/dockerfile:1
# agentsearch image: API, Celery workers and migrations share this image.
#   docker build -t agentsearch .
#   docker run --rm -p 8000:8000 agentsearch            # API
#   docker run --rm agentsearch agentsearch worker --queues celery --concurrency 2

############################ builder ############################
FROM python:3.11-slim AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/venv
ENV PATH="/opt/venv/bin:$PATH"

RUN pip install --upgrade pip setuptools wheel
# torch first (own layer, rarely changes); this exact spec gives the CPU build.
RUN pip install torch==2.13.0

WORKDIR /src
COPY . /src
# flower: the Celery monitoring UI run by the `flower` service from this image.
RUN pip install . "flower>=2.0" \
    && find /opt/venv -name '__pycache__' -type d -prune -exec rm -rf {} +

############################ runtime ############################
FROM python:3.11-slim AS runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH="/opt/venv/bin:$PATH" \
    AGENTSEARCH_DATA_DIR=/data

RUN apt-get update \
    && apt-get install -y --no-install-recommends espeak-ng \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 agentsearch \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --shell /usr/sbin/nologin agentsearch \
    && mkdir -p /app /data \
    && chown agentsearch:agentsearch /app /data

COPY --from=builder /opt/venv /opt/venv
COPY --chown=agentsearch:agentsearch examples/ /app/examples/

WORKDIR /app
USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000

CMD ["agentsearch", "api", "--host", "0.0.0.0", "--port", "8000"]
