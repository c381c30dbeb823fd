"""The MCP server's definition: five tools over the API, whichever transport carries them.

- ``search``: submit a search job and wait for it up to ``wait_s`` (at most ``MAX_WAIT_S``): the answer, its
  sources and artifact links, or the job id and status to poll with ``get_job``;
- ``get_job``: a job's status and, once it ended, its answer (and ``stale``: cited documents changed since);
- ``rate_answer``: a thumbs up or down, with an optional comment, on a job's answer or one of its sources;
- ``list_collections``: the caller's collections with their document counts;
- ``ingest_documents``: documents ``{id, title, text, metadata}`` into a collection (made when a name is new),
  waiting up to ``wait_s`` for their indexing.

Parameters are typed, so the SDK publishes each tool's input and output JSON schema and refuses ill-typed
arguments before a tool runs (naming each field, never quoting its value: ``argument_errors``). Numbers are
strict, as the API's are: a lax ``dict[str, float]`` turned ``{"response": true}`` into 1.0 before the API could
refuse it. Each call acts as one user: ``gateway_for(ctx)`` gives the ``ApiGateway`` that carries the key of the
caller of this message (the stdio server's own key, or the key an HTTP request was authenticated with), so a tool
sees what that user's API requests see, and another user's job or collection answers the not-found error of a
missing one.

Usage::

    server = build_server(lambda ctx: contextlib.nullcontext(ApiGateway.remote(url, key)))
    await server.run_stdio_async()               # src/agentsearch/cli/mcp.py;
    src/agentsearch/api/mcp_server/endpoint.py serves it over HTTP
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field, StrictFloat, StrictInt

from agentsearch.api.mcp_server.argument_errors import argument_errors
from agentsearch.api.mcp_server.gateway import ApiGateway
from agentsearch.api.mcp_server.outcomes import (
    Collections,
    FeedbackOutcome,
    IngestOutcome,
    JobOutcome,
    collection_out,
    job_outcome,
)
from agentsearch.api.mcp_server.requests import DEFAULT_WAIT_S, MAX_WAIT_S, CollectionRef, Mode, search_body
from agentsearch.pipeline.ingestion.documents_in import DocumentIn
from agentsearch.pipeline.retrieval.config import Strategy

GatewayFactory = Callable[[Context], AbstractAsyncContextManager[ApiGateway]]

INSTRUCTIONS = (
    "agentsearch answers questions from a user's document collections with cited sources. Call list_collections "
    "to see the collections, search to ask one (by id or name), get_job to read a job that was still running, "
    "rate_answer to say whether an answer (or one of its sources) was right, and ingest_documents to add documents."
)

CollectionArg = Annotated[str, Field(min_length=1, max_length=400,
                                     description="The collection's id (a UUID) or its name.")]
WaitArg = Annotated[float, Field(ge=0, le=MAX_WAIT_S,
                                 description=f"Seconds to wait before answering with what to poll (at most "
                                             f"{MAX_WAIT_S:.0f}).")]


def build_server(gateway_for: GatewayFactory, name: str = "agentsearch") -> MCPServer:
    server = _quietly(lambda: MCPServer(name, title="agentsearch", instructions=INSTRUCTIONS))
    server.middleware.append(argument_errors)

    @server.tool(
        description="Search a collection and answer the query with cited sources. Submits a search job and waits "
        "up to wait_s for it; a job still running by then is returned with its job_id and status: call get_job.",
        annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=False, open_world_hint=False),
    )
    async def search(
        collection: CollectionArg,
        query: Annotated[str, Field(min_length=1, description="The question or search terms.")],
        ctx: Context,
        top_k: Annotated[StrictInt | None, Field(ge=1, description="How many sources to keep (the API's "
                         "default when unset; at most AGENTSEARCH_MAX_TOP_K).")] = None,
        strategy: Annotated[Strategy | None, Field(description="Retrieval strategy; the service's default "
                                                                "(AGENTSEARCH_SEARCH_STRATEGY) when unset.")] = None,
        agents: Annotated[list[str] | None, Field(max_length=50, description="Run these agents (ids from the "
                          "registry) with default configs instead of the collection's agent set; [] for none.")] = None,
        mode: Annotated[Mode, Field(description="single: one search; iterative: search, evaluate, refine.")] = "single",
        search_options: Annotated[dict[str, Any] | None, Field(description="Retrieval overrides (fusion, "
                                  "semantic_weight, min_score, ...), as the API's search object.")] = None,
        also_search: Annotated[list[str] | None, Field(max_length=20, description="More collections (ids or "
                               "names) searched in parallel; results merged by document id.")] = None,
        use_cache: Annotated[bool, Field(description="Answer from an identical earlier job when there is "
                                                     "one.")] = True,
        filter: Annotated[dict[str, Any] | None, Field(description="Only documents whose metadata match, in the "
                          "API's filter language (docs/filters.md), e.g. {\"eq\": {\"key\": \"region\", \"value\": "
                          "\"emea\"}}.")] = None,
        stage_timeouts: Annotated[dict[str, StrictFloat] | None, Field(description="This job's seconds per stage "
                                  "(pre_search, post_search, response), over the collection's budgets "
                                  "(docs/stage-deadlines.md).")] = None,
        wait_s: WaitArg = DEFAULT_WAIT_S,
    ) -> JobOutcome:
        async with gateway_for(ctx) as api:
            target = await api.collection_id(CollectionRef.parse(collection))
            more = [uuid.UUID(await api.collection_id(CollectionRef.parse(c))) for c in also_search or []]
            body = search_body(uuid.UUID(target), query, top_k=top_k, strategy=strategy, search=search_options,
                               agents=agents, also_search=more, mode=mode, use_cache=use_cache,
                               metadata_filter=filter, stage_timeouts=stage_timeouts)
            return job_outcome(await api.search(body, wait_s), api.base_url)

    @server.tool(
        description="A search job's status and, once it ended, its answer, sources and artifact links.",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def get_job(job_id: Annotated[uuid.UUID, Field(description="The job_id search returned.")],
                      ctx: Context) -> JobOutcome:
        async with gateway_for(ctx) as api:
            return job_outcome(await api.job(job_id), api.base_url)

    @server.tool(
        description="Rate a finished job's answer, or one of its sources, thumbs up or down, with an optional "
        "comment. Rating the same thing again replaces the rating.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                    open_world_hint=False),
    )
    async def rate_answer(
        job_id: Annotated[uuid.UUID, Field(description="The job_id search returned.")],
        rating: Annotated[Literal["up", "down"], Field(description="up: right and useful; down: wrong or "
                                                                    "unhelpful.")],
        ctx: Context,
        comment: Annotated[str | None, Field(max_length=2000, description="What was right or wrong.")] = None,
        source: Annotated[str | None, Field(min_length=1, max_length=512, description="Rate this source of the "
                                            "answer (its document_id) instead of the answer.")] = None,
    ) -> FeedbackOutcome:
        body: dict[str, Any] = {"rating": rating}
        if comment is not None:
            body["comment"] = comment
        if source is not None:
            body["source"] = source
        async with gateway_for(ctx) as api:
            return FeedbackOutcome.model_validate(await api.feedback(job_id, body))

    @server.tool(
        description="The caller's collections: id, name, description and document counts by status.",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def list_collections(ctx: Context) -> Collections:
        async with gateway_for(ctx) as api:
            return Collections(collections=[collection_out(c) for c in await api.collections()])

    @server.tool(
        description="Add documents to a collection (by id, or by name: a new name makes the collection). "
        "Re-sending a document id replaces that document. Waits up to wait_s for the documents to be indexed.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                    open_world_hint=False),
    )
    async def ingest_documents(
        collection: CollectionArg,
        documents: Annotated[list[DocumentIn], Field(min_length=1, max_length=1000,
                                                     description="{id, title, text, metadata} each.")],
        ctx: Context,
        wait_s: WaitArg = DEFAULT_WAIT_S,
    ) -> IngestOutcome:
        async with gateway_for(ctx) as api:
            target, created = await api.collection(CollectionRef.parse(collection), create=True)
            accepted = await api.add_documents(target["id"], [d.model_dump(mode="json") for d in documents])
            view = await api.wait_indexed(target["id"], wait_s)
            pending = view["documents"]["pending"]
            return IngestOutcome(
                collection_id=target["id"], collection_name=target["name"], created=created, accepted=accepted,
                documents=view["documents"], indexed=pending == 0,
                next_step=(f"{pending} documents still pending: list_collections shows the counts" if pending
                           else None),
            )

    return server


def _quietly(build: Callable[[], MCPServer]) -> MCPServer:
    """Build the server without the SDK's logging set-up taking over this process's logging.

    ``MCPServer()`` calls ``logging.basicConfig``, which gives the root logger a handler of its own when it has
    none yet (an API served in process by a CLI command, a test); a placeholder handler makes that call do nothing.
    """
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)
    try:
        return build()
    finally:
        root.removeHandler(placeholder)
