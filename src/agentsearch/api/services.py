"""The application's services as a route takes them: one FastAPI dependency, ``AppServices``.

``create_app`` builds the services once and keeps them on the application (``app.state.services``); a route names
them in its signature, as it names its caller, and never reaches into the application's state itself. A test or a
second application with services of its own is served by the same routes unchanged.

Usage::

    @router.get("/v1/things")
    def list_things(user_id: CurrentUser, services: AppServices) -> list[dict]:
        with services.db.session() as s:
            ...

    services_of(request)        # where no signature takes dependencies (authentication, rate limits, cookies)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from agentsearch.pipeline.services import Services


def services_of(request: Request) -> Services:
    """The services of the application serving the request."""
    return request.app.state.services


AppServices = Annotated[Services, Depends(services_of)]
