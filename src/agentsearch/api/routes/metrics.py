"""``GET /metrics``: Prometheus exposition of what every worker recorded in the shared Redis.

Unauthenticated, like ``/healthz``: scrapers hold no API key, and nothing here names a user, a query or a document.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from agentsearch.api.services import services_of
from agentsearch.pipeline.observability.exposition import AgentSearchCollector, broker_redis

router = APIRouter(tags=["metrics"])


def metrics_registry(request: Request) -> CollectorRegistry:
    """One registry per app, made on the first scrape (the broker client is only needed from then on)."""
    state = request.app.state
    registry: CollectorRegistry | None = getattr(state, "metrics_registry", None)
    if registry is None:
        services = services_of(request)
        settings = services.settings
        # The embedded broker (memory://) has no queue to measure from outside; broker_redis gives None for it.
        broker = None if settings.embedded else broker_redis(settings.broker_url)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(AgentSearchCollector(services.redis, broker=broker))
        state.metrics_registry = registry
    return registry


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    return Response(generate_latest(metrics_registry(request)), media_type=CONTENT_TYPE_LATEST)
