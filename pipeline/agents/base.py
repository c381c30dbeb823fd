"""The agent contract: stages, typed inputs and outputs, context, and the ``Agent`` base classes.

An agent is a small class with an id, a stage, a version (part of its cache key), a pydantic ``Config`` model (a bad
config is refused when it is saved, not when a job runs), a default timeout, and whether its results may be cached.

Usage::

    class Shouter(PreSearchAgent):
        agent_id = "shouter"
        version = "1"
        description = "Upper-cases the query."

        class Config(AgentConfig):
            exclaim: bool = False

        def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
            query = inp.query.upper() + ("!" if self.config.exclaim else "")
            return PreSearchOutput(query=query, metadata={"shouted": True})

    Shouter({"exclaim": True}).run(PreSearchInput(query="hi"), AgentContext(pipeline_stage=Stage.PRE_SEARCH))
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from pipeline.documents import CotStep, Document, Source


class Stage(StrEnum):
    PRE_SEARCH = "pre_search"
    POST_SEARCH = "post_search"
    RESPONSE = "response"


class PreSearchInput(BaseModel):
    query: str
    collection_id: str | None = None
    user_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class PreSearchOutput(BaseModel):
    query: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    skip_search: bool = False


class PostSearchInput(BaseModel):
    documents: list[Document]
    query: str
    collection_id: str | None = None
    user_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class PostSearchOutput(BaseModel):
    documents: list[Document]
    metadata: dict[str, Any] = Field(default_factory=dict)


class ResponseAgentInput(BaseModel):
    answer: str
    sources: list[Source]
    query: str
    documents: list[Document] = Field(default_factory=list)
    collection_id: str | None = None
    user_id: str | None = None
    cot_steps: list[CotStep] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class AgentArtifact(BaseModel):
    """What a response agent makes. ``data`` holds raw bytes; base64 appears only in the API response."""

    agent_id: str
    type: str
    data: bytes
    filename: str
    content_type: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class AgentResult(BaseModel):
    """One agent invocation as recorded in the job: the seed's fields plus status, timing and cache use."""

    agent_id: str
    config_id: str | None = None
    stage: Stage
    success: bool
    status: str  # ok | error | timeout | circuit_open | skipped
    data: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    errors: list[str] | None = None
    duration_ms: float = 0.0
    cache_hit: bool = False


class AgentContext(BaseModel):
    collection_id: str | None = None
    user_id: str | None = None
    conversation_id: str | None = None
    conversation_history: list[dict[str, str]] | None = None
    query: str | None = None
    retrieved_documents: list[Document] | None = None
    search_metadata: dict[str, Any] | None = None
    pipeline_stage: Stage
    previous_agent_results: list[AgentResult] = Field(default_factory=list)
    collection_epoch: int = Field(0, description="The collection's index epoch: part of every agent cache key.")
    # What an agent may use beyond its input: search, embeddings, the collection's lexicon, the LLM.
    # A live object, never serialised; None in contexts built without services (plain unit tests).
    tools: Any = Field(None, exclude=True)


class AgentConfig(BaseModel):
    """Base for agent config models: unknown keys are refused so a typo is caught when the config is saved."""

    model_config = ConfigDict(extra="forbid")


class AgentSkipped(Exception):
    """Raised by an agent that has nothing to do for this input; recorded as ``skipped`` with the reason."""


class Agent:
    agent_id: ClassVar[str]
    stage: ClassVar[Stage]
    version: ClassVar[str] = "1"
    description: ClassVar[str] = ""
    Config: ClassVar[type[AgentConfig]] = AgentConfig
    default_timeout_s: ClassVar[float] = 30.0
    cacheable: ClassVar[bool] = True
    cache_ttl_s: ClassVar[int] = 3600
    # Config fields naming something outside the config: {"field": ToolReference("mcp") | CollectionReference()}
    # (pipeline.agents.references). Checked when a config is saved, and by the agent (resolve_references) when it runs.
    references: ClassVar[dict[str, Any]] = {}

    def __init__(self, config: AgentConfig | dict[str, Any] | None = None) -> None:
        if isinstance(config, self.Config):
            self.config = config
        else:
            self.config = self.Config.model_validate(config or {})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


class PreSearchAgent(Agent):
    stage = Stage.PRE_SEARCH
    Input: ClassVar[type[BaseModel]] = PreSearchInput
    Output: ClassVar[type[BaseModel]] = PreSearchOutput

    def run(self, inp: PreSearchInput, ctx: AgentContext) -> PreSearchOutput:
        raise NotImplementedError


class PostSearchAgent(Agent):
    stage = Stage.POST_SEARCH
    Input: ClassVar[type[BaseModel]] = PostSearchInput
    Output: ClassVar[type[BaseModel]] = PostSearchOutput

    def run(self, inp: PostSearchInput, ctx: AgentContext) -> PostSearchOutput:
        raise NotImplementedError


class ResponseAgent(Agent):
    stage = Stage.RESPONSE
    Input: ClassVar[type[BaseModel]] = ResponseAgentInput
    Output: ClassVar[type[BaseModel]] = AgentArtifact
    # Artifacts are stored once by reference; caching their bytes in Redis would defeat that.
    cacheable = False

    def run(self, inp: ResponseAgentInput, ctx: AgentContext) -> AgentArtifact:
        raise NotImplementedError
