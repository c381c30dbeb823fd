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

An agent with heavy setup (a model, a dictionary) does it in ``warm_up``, which the runner calls once per process
before the first run, keeping what it loads in a ``Loaded`` on the class.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SkipValidation
from pydantic.json_schema import SkipJsonSchema

from agentsearch.pipeline.documents import Citation, CotStep, Document, Source

# The stages and a run's record are the records' (below the agents, so metrics and traces read them without the
# agents); an agent imports them from here, with the rest of its contract.
from agentsearch.pipeline.records.agent_runs import AgentResult, Stage

if TYPE_CHECKING:  # types only: the contract stays free of the LLM client and the database
    from agentsearch.pipeline.platform.egress import EgressPolicy
    from agentsearch.pipeline.platform.llm import LLMClient
    from agentsearch.pipeline.security.registered_tools import RegisteredTool

T = TypeVar("T")


class PreSearchInput(BaseModel):
    query: str
    collection_id: str | None = None
    user_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class PreSearchOutput(BaseModel):
    query: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    skip_search: bool = False
    next_agent_id: str | None = Field(
        None, description="The next agent of this stage to run (an agent id or config id of the stage's agents, "
        "after this one); the agents between are passed over (docs/stage-deadlines.md).")


class PostSearchInput(BaseModel):
    documents: list[Document]
    query: str
    collection_id: str | None = None
    user_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class PostSearchOutput(BaseModel):
    documents: list[Document]
    metadata: dict[str, Any] = Field(default_factory=dict)
    next_agent_id: str | None = Field(None, description="As PreSearchOutput.next_agent_id.")


class ResponseAgentInput(BaseModel):
    answer: str
    sources: list[Source]
    query: str
    documents: list[Document] = Field(default_factory=list)
    collection_id: str | None = None
    user_id: str | None = None
    cot_steps: list[CotStep] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # The answer's sentences checked against the sources they cite (agentsearch.pipeline.job.answer.citations).
    citations: list[Citation] = Field(default_factory=list)


class AgentArtifact(BaseModel):
    """What a response agent makes. ``data`` holds raw bytes; base64 appears only in the API response."""

    agent_id: str
    type: str
    data: bytes
    filename: str
    content_type: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class Gate(Protocol):
    """A circuit breaker as an agent sees one: may a call go out now, and how did it end."""

    def admits(self) -> bool: ...

    def record(self, error: BaseException | None) -> None: ...


class Toolbox(Protocol):
    """What an agent may use beyond its input, as ``ctx.tools``: search, embeddings, the collection's lexicon, the
    LLM, registered tools, a shared breaker for its own dependency.

    The service's toolbox is ``agentsearch.pipeline.agents.toolbox.AgentTools``, bound to the job's user. Evaluation
    runs (``agentsearch.pipeline.eval.retrieval.CorpusTools``) and tests hand in smaller ones with the members their
    agents use; an agent that may meet one asks for what is optional with ``getattr`` (or ``ctx.llm`` for the LLM).
    """

    @property
    def llm(self) -> LLMClient | None: ...

    @property
    def egress_policy(self) -> EgressPolicy: ...

    def search(self, collection_id: str, query: str, top_k: int = 10, strategy: str = "hybrid") -> list[Document]: ...

    def embed(self, texts: list[str]) -> list[list[float]]: ...

    def vocabulary(self, collection_id: str) -> dict[str, int]: ...

    def acronyms(self, collection_id: str) -> dict[str, str]: ...

    def registered_tool(self, kind: str, name: str) -> RegisteredTool: ...

    def owned_collection(self, collection_id: str) -> Any: ...

    def breaker(self, name: str, fail_max: int, reset_timeout_s: float) -> Gate: ...


class AgentContext(BaseModel):
    # The toolbox is a live object of any class that fits ``Toolbox``: taken as given, never validated.
    model_config = ConfigDict(arbitrary_types_allowed=True)

    collection_id: str | None = None
    user_id: str | None = None
    conversation_id: str | None = Field(None, description="The conversation the job asks in, if any.")
    conversation_history: list[dict[str, str]] | None = Field(
        None, description="The messages the job's question follows ({role: user|assistant, content}, oldest first; "
        "agentsearch.pipeline.job.conversation): part of every agent cache key when present."
    )
    query: str | None = None
    retrieved_documents: list[Document] | None = None
    search_metadata: dict[str, Any] | None = None
    pipeline_stage: Stage
    previous_agent_results: list[AgentResult] = Field(default_factory=list)
    collection_epoch: int = Field(0, description="The collection's index epoch: part of every agent cache key.")
    search_filter: dict[str, Any] | None = Field(
        None, description="The job's metadata filter (agentsearch.pipeline.retrieval.filters): every search an agent "
        "makes "
        "through its tools applies it, and it is part of the agent's cache key."
    )
    access_tokens: list[str] | None = Field(
        None, description="The document groups the job's user held at submission (agentsearch.pipeline.security."
        "document_access): what its tools find in a team collection, and part of the agent's cache key when set."
    )
    # What an agent may use beyond its input (``Toolbox``). A live object, never serialised; None in contexts built
    # without services (plain unit tests).
    tools: SkipJsonSchema[SkipValidation[Toolbox | None]] = Field(None, exclude=True)

    @property
    def llm(self) -> LLMClient | None:
        """The service's LLM client; None without a toolbox or without an LLM configured (the offline path)."""
        return getattr(self.tools, "llm", None)


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
    # (agentsearch.pipeline.agents.references). Checked when a config is saved, and by the agent (resolve_references)
    # when it runs.
    references: ClassVar[dict[str, Any]] = {}
    # The config field mapping a label to the agent that should run next (``next_agent_id``), if the agent routes:
    # a collection's agent set is refused when it names an agent the set does not run after this one.
    routing_field: ClassVar[str | None] = None
    # Declared for the code that runs any agent; each agent narrows ``config`` to its own ``Config``
    # (``config: Config``), and each stage's base class sets ``Input``, ``Output`` and ``run`` over them.
    config: AgentConfig
    Input: ClassVar[type[BaseModel]]
    Output: ClassVar[type[BaseModel]]
    run: Callable[[Any, AgentContext], Any]

    def __init__(self, config: AgentConfig | dict[str, Any] | None = None) -> None:
        if isinstance(config, self.Config):
            self.config = config
        else:
            self.config = self.Config.model_validate(config or {})

    def warm_up(self) -> None:
        """Heavy setup (a model, a dictionary, fonts): called by the runner once per process for each agent class
        and config, before that agent's first run and within its deadline. Nothing by default.

        The runner builds a new agent for every call, so what is loaded is kept on the class (``Loaded``); and
        ``run`` must not depend on ``warm_up`` having been called, since tests and evaluations call ``run`` alone.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


class Loaded(Generic[T]):
    """What an agent's ``warm_up`` loads: made by ``load`` on the first ``get`` in a process (once, whichever
    thread asks first) and shared by every instance; a failed load is tried again on the next ``get``.

    Usage::

        class SpellChecker(PreSearchAgent):
            english: ClassVar[Loaded[SymSpell]] = Loaded(load_english_dictionary)

            def warm_up(self) -> None:
                self.english.get()
    """

    def __init__(self, load: Callable[[], T]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._value: T | None = None
        self._done = False

    def get(self) -> T:
        if not self._done:
            with self._lock:
                if not self._done:
                    self._value, self._done = self._load(), True
        return self._value  # type: ignore[return-value]


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
