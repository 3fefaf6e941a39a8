"""Master configuration: one ``Settings`` read from the environment and ``.env``.

Nothing else in the master reads ``os.environ``. Field names are the spec's
environment variable names, lower-cased; defaults are the spec's defaults. A feature's
settings are added with the feature: a field that nothing reads would be a promise the
master does not keep.
"""

from __future__ import annotations

import os
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REMOVED_SWITCHES = {
    "OPENAGENT_HTTP_QUERY": "POST /query",
    "OPENAGENT_OPENAI_API": "the OpenAI-compatible API (/v1)",
    "OPENAGENT_WORKSPACE_RESTORE": "POST /internal/workspace/restore",
    "OPENAGENT_AGENT_GENERATOR": "POST /generate-agent",
}
"""Route switches the keys' roles replaced: one still set to off refuses the start rather than
leave open what it closed (docs/operations/security.md, "Roles")."""


class Settings(BaseSettings):
    """Every setting of the master, with the defaults of the spec's env table."""

    # use_attribute_docstrings: each field's docstring is its description (docs/reference/settings.md).
    model_config = SettingsConfigDict(
        env_file=".env", extra="ignore", frozen=True, use_attribute_docstrings=True
    )

    # Master
    redis_url: str = "redis://127.0.0.1:6379"
    """The master's Redis: agents, sessions, calls, attachments, cluster state."""
    redis_agent_ttl_seconds: int = Field(default=86400, gt=0)
    """TTL of stored invocation agents (``agent:{id}``), refreshed when the agent is used."""
    redis_session_ttl_seconds: int = Field(default=86400, gt=0)
    """TTL of sessions (``session:{id}``) and their attachments; a session expires this long after its last turn."""
    redis_query_timeout_seconds: float = Field(default=5.0, gt=0)
    """The longest a query waits for Redis at each of its session steps (check or load before it
    runs, append after): connecting, the command and its one retry together. Past it the query
    answers 503 ``session_store_unavailable``, also when Redis hangs rather than refuses."""
    master_host: str = "127.0.0.1"
    """Where the master listens (``scripts/run.sh`` and ``openagent master`` pass it to uvicorn)."""
    master_port: int = Field(default=8000, ge=1, le=65535)
    """The master's port (``scripts/run.sh`` and ``openagent master`` pass it to uvicorn)."""
    master_base_url: str = ""
    """The master's HTTP URL, for tool callbacks; unset: ``http://MASTER_HOST:MASTER_PORT``
    (loopback for a wildcard host), so ``MASTER_PORT`` alone moves it."""
    openai_api_key: SecretStr | None = None
    """API key of the OpenAI-compatible LLM (orchestrator, summarizer, agent generator)."""
    openai_base_url: str | None = None
    """An OpenAI-compatible endpoint instead of api.openai.com (Ollama, vLLM, llama.cpp server): an
    ``http://`` or ``https://`` URL, e.g. ``http://localhost:11434/v1``; anything else is refused at
    start."""
    openagent_api_key: SecretStr | None = None
    """When set, every route but ``GET /health``, ``GET /ready``, the API docs and the web UI, and every
    ``/ws`` connection, need it as ``Authorization: Bearer <key>``."""
    openagent_allow_no_auth: bool = False
    """Let ``python -m master`` listen on a non-loopback address without ``OPENAGENT_API_KEY``
    (everyone who reaches it is then an administrator); without it the master refuses to start."""
    openagent_ws_max_message_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    """Largest WebSocket frame; a larger one closes the connection with 1009 before it is buffered (``python -m master`` sets uvicorn's ``ws_max_size`` to it)."""
    openagent_http_max_body_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    """Largest HTTP request body, counted as it streams in; larger gets 413."""
    openagent_llm_timeout: float = Field(default=120.0, gt=0)
    """Seconds the LLM server may take to send the first byte of its answer, and then each later
    piece of a streamed one (a local model on a small machine may think for a minute)."""
    openagent_llm_connect_timeout: float = Field(default=10.0, gt=0)
    """Seconds to connect to the LLM server."""
    openagent_llm_total_timeout: float = Field(default=600.0, gt=0)
    """Seconds one LLM request may take with its retries; a busy server (HTTP 503, e.g. llama.cpp's
    single slot) is retried until then. A query's own time budget bounds it too."""
    openagent_llm_max_retries: int = Field(default=2, ge=0)
    """Retries with backoff on LLM timeouts, 429 and 5xx (a busy 503 is retried until
    ``OPENAGENT_LLM_TOTAL_TIMEOUT``)."""
    openagent_llm_compat: Literal["auto", "openai", "llamacpp", "ollama", "vllm"] = "auto"
    """The dialect of the LLM server: ``auto`` asks it once (``/props``, ``/api/version``,
    ``/v1/models``) and logs its choice, using the common subset of the chat API when it says
    nothing; ``openai``, ``llamacpp``, ``ollama`` or ``vllm`` set it (see "Use a local model")."""
    openagent_llm_context_windows: str | None = None
    """Context windows of models, as ``model=tokens`` pairs separated by commas (e.g.
    ``smollm2=8192,llama3.2=131072``); a model not listed has what its server reports (llama.cpp,
    vLLM), else ``ORCHESTRATOR_CONTEXT_MAX_TOKENS`` is its budget. The context the master sends
    fits the window less ``OPENAGENT_LLM_MAX_TOKENS``, with a margin for another tokenizer."""
    openagent_llm_max_tokens: int = Field(default=2048, ge=0)
    """Tokens the model may write per round (``max_tokens``, or ``max_completion_tokens`` for the
    OpenAI API) unless a query sets its own; 0 sends no bound."""
    openagent_llm_loopback_only: bool = False
    """Refuse any LLM endpoint off this machine (the test-suite sets it, so no test reaches a real LLM)."""

    # Orchestrator / models
    openagent_chat_models: str | None = None
    """Comma-separated model ids the orchestrator and the agent generator may use; the first is the default. Unset: ``gpt-4o-mini,gpt-4o,gpt-4.1-mini,gpt-4.1``."""
    orchestrator_model: str | None = None
    """The default orchestrator model (unset: the first of ``OPENAGENT_CHAT_MODELS``); an id not in the list is added."""
    agent_generator_model: str | None = None
    """The default model of ``POST /generate-agent`` (unset: the orchestrator's default)."""
    orchestrator_model_allowlist: str | None = None
    """Legacy, only when ``OPENAGENT_CHAT_MODELS`` is unset: extra model ids merged with ``ORCHESTRATOR_MODEL``."""
    orchestrator_context_max_tokens: int = Field(default=12000, gt=0)
    """Tokens of context sent to the model (at most: a model whose window is smaller gets what its
    window leaves, see ``OPENAGENT_LLM_CONTEXT_WINDOWS``); older turns are summarized beyond it,
    and the tools most relevant to the query are offered first when not all fit."""
    orchestrator_recent_turns: int = Field(default=8, ge=0)
    """Recent raw turns kept in full when the older ones are summarized."""
    summarizer_model: str | None = None
    """The model that summarizes long sessions (unset: the orchestrator's default)."""

    # Budgets per query (a request may override each one)
    orchestrator_max_tool_calls: int = Field(default=50, ge=0)
    """Tool calls one query may make (a request's ``budget.max_tool_calls`` overrides it)."""
    orchestrator_max_tokens: int = Field(default=200_000, gt=0)
    """LLM tokens (prompt and completion, over every call) one query may spend (``budget.max_tokens``)."""
    orchestrator_max_seconds: float = Field(default=300.0, gt=0)
    """Wall-clock seconds one query may run (``budget.max_seconds``)."""

    # Timeouts (seconds)
    health_check_timeout: float = Field(default=2.0, gt=0)
    """Seconds per health check of an invocation agent (its ``/health``)."""
    openagent_health_check_interval: float = Field(default=30.0, ge=0)
    """Seconds between background health checks of invocation agents (0 disables)."""
    tool_call_timeout: float = Field(default=30.0, gt=0)
    """Seconds to wait for a tool's result (WebSocket or HTTP callback) before the call fails."""
    openagent_inflight_health_interval: float = Field(default=2.0, gt=0)
    """Seconds between health checks of an invocation agent while calls to it are in flight; a
    failed check fails those calls at once."""
    tool_invoke_http_timeout: float = Field(default=2.0, gt=0)
    """Seconds for the master's POST to an invocation agent's tool endpoint."""
    openagent_remote_discovery_timeout: float = Field(default=10.0, gt=0)
    """Seconds ``POST /register`` waits for an MCP server or A2A agent to list its tools (card)."""
    openagent_agent_url_allow: str = ""
    """Comma-separated host names and addresses/CIDRs the master may call for agents even where the agent URL policy refuses them by default (link-local, cloud metadata, multicast, unspecified, broadcast), e.g. ``169.254.10.0/24``. Loopback and private ranges are allowed without it for an administrator's registrations only: name them here to let the other keys' agents use them."""
    openagent_agent_url_deny: str = ""
    """Comma-separated host names and addresses/CIDRs the master never calls for agents (registration is refused with 422, connections fail), e.g. ``10.0.0.0/8,db.internal``; wins over ``OPENAGENT_AGENT_URL_ALLOW``."""

    # Bearer JWTs from an identity provider (all three of issuer, audience, JWKS URL: on)
    openagent_jwt_issuer: str = ""
    """The ``iss`` a bearer JWT must carry; with ``OPENAGENT_JWT_AUDIENCE`` and ``OPENAGENT_JWT_JWKS_URL``, JWTs are accepted besides API keys."""
    openagent_jwt_audience: str = ""
    """The ``aud`` a bearer JWT must carry."""
    openagent_jwt_jwks_url: str = ""
    """The identity provider's JWKS (signing keys), fetched when needed and again for an unknown key id."""
    openagent_jwt_role_claim: str = "role"
    """The JWT claim holding the caller's role (``admin``, ``client``, ``agent``, ``viewer``); a token without a valid one is refused."""
    openagent_jwt_tenant_claim: str = "tenant"
    """The JWT claim holding the caller's tenant (``default`` when absent): a string matching the
    tenant name pattern, or the token is refused."""
    openagent_jwt_max_lifetime_seconds: int = Field(default=86400, gt=0)
    """The longest a bearer JWT may live: a token whose ``exp`` is further than this from its
    ``iat`` (or, without ``iat``, from now) is refused; ``exp`` is required."""

    # Auto mode
    orchestrator_auto_max_steps: int = Field(default=20, gt=0)
    """Tool rounds per query in auto mode; at the limit the model answers with what was done."""
    orchestrator_auto_spawn_wait_seconds: float = Field(default=120.0, gt=0)
    """How long auto mode waits for a spawned (sandboxed) agent to register."""

    # Registration limits (the tools offered to the model)
    openagent_max_tool_schema_bytes: int = Field(default=16 * 1024, gt=0)
    """Bytes of one tool's JSON (name, description, parameters, endpoint)."""
    openagent_max_tools_per_agent: int = Field(default=64, gt=0)
    """Tools one agent may register."""
    openagent_max_catalog_tools: int = Field(default=1024, gt=0)
    """Tools of every live and stored agent together."""
    openagent_max_agent_metadata_bytes: int = Field(default=16 * 1024, gt=0)
    """Bytes of one agent's ``metadata`` (as compact JSON) at registration; a larger one is refused
    (``limit_exceeded``) and nothing is stored."""

    # Limits on what agents send while they run
    openagent_max_tool_result_bytes: int = Field(default=1024 * 1024, gt=0)
    """Bytes of one tool result (as compact JSON), whatever brought it; a larger one fails the call
    with an error the model sees, and is never stored."""
    openagent_max_progress_per_second: int = Field(default=10, gt=0)
    """Progress frames of one tool call relayed (and logged, at DEBUG) per second; the others are
    coalesced (the latest is relayed when the second ends) and counted in ``/metrics``."""

    # Admission control (queries in flight)
    openagent_max_queries_in_flight: int = Field(default=256, gt=0)
    """Queries the master runs at once, over every entry point; more get ``too_many_queries`` (HTTP 429)."""
    openagent_tenant_max_concurrent_queries: int | None = Field(default=None, gt=0)
    """Queries one tenant's keys may have in flight at once, over every entry point; more get
    ``too_many_queries`` (HTTP 429) while other tenants' queries are still admitted. Unset: no cap
    per tenant (the master's cap alone), right for a hub with one tenant; with several, set it
    below ``OPENAGENT_MAX_QUERIES_IN_FLIGHT``."""
    openagent_a2a_public_cards: bool = False
    """Serve the A2A agent cards (``/.well-known/agent-card.json``, ``/a2a/agents/{id}/.well-known/agent-card.json``)
    without the API key, for directories that crawl them; the A2A endpoints still need it."""
    openagent_ws_max_queries_per_connection: int = Field(default=16, gt=0)
    """Queries one WebSocket connection may have in flight; more get an ``error`` ``too_many_queries``."""

    # Human approval of tool calls
    openagent_approval_tools: str = ""
    """Comma-separated patterns (fnmatch) over ``<agent_id>__<tool>`` whose calls wait for a person's
    approval, besides the tools whose schema has ``requires_approval`` (e.g. ``payments__*,*__delete_*``)."""
    openagent_approval_exempt: str = ""
    """Comma-separated patterns (fnmatch) over ``<agent_id>__<tool>`` lifted from
    ``OPENAGENT_APPROVAL_TOOLS`` and from the tools' own ``requires_approval`` (the exemption wins)."""
    openagent_approval_ttl_seconds: int = Field(default=86400, gt=0)
    """How long a paused run waits for its approvals; an undecided one is then ``expired``."""
    openagent_approval_sweep_seconds: float = Field(default=30.0, ge=0)
    """Seconds between two passes of the expiry sweep, which marks the approvals whose time has passed
    ``expired`` and ends their runs (0 disables it: an expired approval is then found at the next read)."""
    openagent_run_lease_seconds: float = Field(default=10.0, ge=0.3)
    """A run whose master has not renewed its holder lease for this long is marked ``failed``
    (the master is taken for lost) by any live master; the lease is renewed every third of it."""

    # Feature toggles
    openagent_openai_auto_mode: bool = False
    """Answer the OpenAI-compatible API's questions in auto mode (several tool rounds, up to
    ``ORCHESTRATOR_AUTO_MAX_STEPS``) instead of one tool round."""
    openagent_openai_think_tags: bool = False
    """Stream the tool steps of the OpenAI-compatible API inside a ``<think>`` block of the content
    (for chat UIs that show only that) instead of as ``delta.reasoning_content``."""
    openagent_yaml_runner: bool = True
    """In-master YAML agent runner (``POST /internal/yaml-agents/start``): 0 and this master runs
    no agent code on its own host, whoever asks (``/start`` and ``/stop`` give 403, and a restart
    starts none again)."""
    openagent_yaml_agents_restart: bool = True
    """Keep the YAML agents this master started in Redis and start them again when it restarts
    (under ``OPENAGENT_MASTER_ID``; a master of a cluster without one keeps none); 0: a restart
    leaves them stopped."""

    # Agent builder
    openagent_agents_root: Path = Path(__file__).resolve().parent.parent
    """The directory holding ``agents/``, ``system_agents/`` and ``sample_agents/`` (the repository)."""

    # Agent code the master starts (YAML and builder agents): its user and limits
    openagent_agent_user: str = Field(default="openagent-agent", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    """System user whose group agent processes run in (made with ``useradd --system`` when missing);
    each agent gets a uid of its own from ``OPENAGENT_AGENT_UID_BASE``. Used when the master is root."""
    openagent_agent_uid_base: int = Field(default=200000, ge=1)
    """The first of the uids agent processes run as, one per running agent (pick a range no person
    or service uses; never 0). A range that holds the uid of an existing user (`/etc/passwd`) is
    refused: no agent code starts, and the start's outcome names the user."""
    openagent_agent_uid_count: int = Field(default=10000, ge=1)
    """How many uids from ``OPENAGENT_AGENT_UID_BASE`` agents may use."""
    openagent_allow_unisolated_agents: bool = False
    """Start agent code even when the master is not root and cannot give it a user of its own: the
    agents then run as the master's user and could read its secrets (said once in the log at start)."""
    openagent_agent_memory_mb: int = Field(default=1024, ge=0)
    """Address-space limit of each agent process, in MiB (0: none)."""
    openagent_agent_cpu_seconds: int = Field(default=3600, ge=0)
    """CPU-time limit of each agent process; past it the process ends and is started again (0: none)."""
    openagent_agent_open_files: int = Field(default=256, ge=0)
    """Open files of each agent process (0: the master's limit)."""
    openagent_agent_max_processes: int = Field(default=128, ge=0)
    """Processes and threads one agent may have (``RLIMIT_NPROC`` of its own uid; 0: none)."""

    # RAG / attachments (the RAG agents read OPENAGENT_EMBEDDING_MODEL, OPENAGENT_RAG_EXTRACT_MODEL
    # and RAG_EXTRACT_CACHE_TTL_SECONDS themselves: see openagent.rag.config)
    rag_max_attachment_bytes: int = Field(default=2097152, gt=0)
    """Largest attached file, in bytes; larger gets 413 naming the file."""
    rag_max_attachments: int = Field(default=5, ge=0)
    """Files one query may attach."""
    openagent_session_attachment_max_bytes: int = Field(default=20 * 1024 * 1024, gt=0)
    """All the attachments a session may hold, in bytes (each content counted once); a query that
    would pass it is refused with 413 before anything runs. Blobs live in Redis for the session's TTL."""
    rag_tool_http_timeout: float = Field(default=120.0, gt=0)
    """Seconds for the HTTP request of a RAG tool call (instead of ``TOOL_INVOKE_HTTP_TIMEOUT``)."""
    rag_tool_call_timeout: float = Field(default=180.0, gt=0)
    """Seconds to wait for a RAG tool's result (instead of ``TOOL_CALL_TIMEOUT``)."""

    # Web UI
    openagent_ui_dir: str | None = None
    """The built UI served at ``/ui``; default ``openagent-ui/dist`` of the repository, when built."""

    # The MCP server at /mcp (master/doors/mcp/, docs/guides/mcp-clients.md)
    openagent_mcp_max_sessions: int = Field(default=1000, gt=0)
    """MCP clients of the 2025 revisions with a session open at once; one more gets 503 until one
    ends (2026-07-28 clients keep no session)."""
    openagent_mcp_session_idle_seconds: float = Field(default=1800.0, gt=0)
    """A 2025 MCP session with no request and no open stream for this long is closed (its client
    starts a new one)."""
    openagent_mcp_allowed_hosts: str = ""
    """``Host`` values ``/mcp`` accepts, comma-separated (``name:port``, or ``name:*`` for any
    port): the MCP transport's defence against DNS rebinding (a web page that makes the browser
    call a master on the user's machine; a request whose ``Origin`` is not one of these hosts is
    refused too). Empty: the loopback names (``127.0.0.1``, ``localhost``, ``[::1]``, any port)
    when ``MASTER_HOST`` is a loopback address, no check otherwise. Behind a proxy that keeps
    the public ``Host``, list it here."""
    openagent_mcp_tools_check_seconds: float = Field(default=2.0, gt=0)
    """How often the MCP server compares the tool list with the one its clients saw, to send
    ``notifications/tools/list_changed`` (a WebSocket agent joining or leaving this master, and a
    cluster heartbeat, are told at once)."""

    # Several masters on one Redis (master/cluster/, docs/scale-out.md)
    openagent_cluster: bool = False
    """Share WebSocket agents with the other masters on this Redis (off: a master serves only its own)."""
    openagent_master_id: str | None = None
    """This master's id in the cluster; default ``<hostname>-<pid>-<random>``, new at every start."""
    openagent_master_lease_seconds: float = Field(default=10.0, ge=0.5)
    """A master that has not renewed its lease for this long is taken for dead by the others."""
    openagent_drain_seconds: float = Field(default=20.0, ge=0)
    """On SIGTERM, how long the master waits for its queries and tool calls in flight to finish
    before it fails the calls left and hands its WebSocket agents off (``master/gateway/drain.py``)."""

    # Operations (master/observability/)
    openagent_log_format: Literal["text", "json"] = "text"
    """``json``: one JSON object per log line, with query_id, session_id and call_id."""
    otel_sdk_disabled: bool = False
    """``true`` turns OpenTelemetry off even when an exporter is configured."""
    otel_traces_exporter: str | None = None
    """``otlp`` (reads ``OTEL_EXPORTER_OTLP_*``), ``console`` or ``none``; traces are off unless an exporter is asked for (needs the ``tracing`` extra)."""
    otel_exporter_otlp_endpoint: str | None = None
    """The OTLP collector, e.g. ``http://127.0.0.1:4318``; setting it turns traces on."""
    otel_exporter_otlp_traces_endpoint: str | None = None
    """The OTLP endpoint of traces only, when it differs from ``OTEL_EXPORTER_OTLP_ENDPOINT``."""
    otel_service_name: str = "openagent-master"
    """The service name of the master's spans."""

    # Collaboration
    openagent_collaboration: bool = True
    """Collaboration sessions between agents; 0 turns them off."""
    openagent_collab_timeout: float = Field(default=120.0, gt=0)
    """Seconds a collaboration session may last before the master ends it."""
    openagent_collab_max_messages: int = Field(default=50, gt=0)
    """Peer messages a collaboration session may carry before the master ends it."""
    openagent_collab_session_ttl: int = Field(default=86400, gt=0)
    """TTL of recorded collaboration sessions (``collab:{id}``)."""

    # Kubernetes sandbox (master/sandbox/)
    openagent_k8s_sandbox: bool = False
    """Deploy agent code into Kubernetes (``/internal/sandbox-agent/*``, auto-mode spawns, ``GET /agents``'
    ``sandbox`` field). Off by default, unlike the spec's 1: most masters run without a cluster."""
    openagent_k8s_namespace: str = "agents"
    """Namespace of the sandbox's agent workloads."""
    openagent_k8s_pool_label_selector: str = "openagent.io/role=agent-pool"
    """Label selector of the pool runner Pods."""
    openagent_k8s_master_ws: str = "ws://host.minikube.internal:8000/ws"
    """The master's WebSocket URL given to deployed agents (must resolve from inside the cluster)."""
    openagent_k8s_agent_image: str = "openagent/agent-runtime:latest"
    """Image of ``new_pod`` agents."""
    openagent_k8s_agent_image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "Never"
    """Image pull policy of agent Pods (``Never`` suits images built inside Minikube)."""
    openagent_k8s_pool_runner_image: str = "openagent/agent-pool-runner:latest"
    """Image of the pool runner."""
    openagent_k8s_pool_runner_port: int = Field(default=8080, gt=0, lt=65536)
    """The pool runner's HTTP port inside its Pod."""
    openagent_k8s_log_tail_lines: int = Field(default=120, ge=0)
    """Log lines shown for an unhealthy sandboxed agent (``GET /agents``' ``sandbox.log_tail``)."""
    openagent_k8s_indexer_redis_sidecar: bool = True
    """Give ``document-indexer-agent`` a Redis sidecar in ``new_pod`` placement."""
    openagent_k8s_indexer_redis_url: str | None = None
    """Redis of ``document-indexer-agent`` without its sidecar (unset: none; never ``REDIS_URL``,
    whose password is the master's)."""
    openagent_k8s_sandbox_runtime_ttl: int = Field(default=604800, gt=0)
    """TTL of the sandbox's placement records (``sandbox:placement:{id}``)."""
    # Not in the spec's table: the resources and runtime class of new_pod agent Pods.
    openagent_k8s_agent_cpu_request: str = "50m"
    """CPU request of a ``new_pod`` agent container."""
    openagent_k8s_agent_cpu_limit: str = "500m"
    """CPU limit of a ``new_pod`` agent container."""
    openagent_k8s_agent_memory_request: str = "128Mi"
    """Memory request of a ``new_pod`` agent container."""
    openagent_k8s_agent_memory_limit: str = "512Mi"
    """Memory limit of a ``new_pod`` agent container."""
    openagent_k8s_runtime_class: str | None = None
    """``runtimeClassName`` of agent Pods, e.g. ``gvisor``; unset: the cluster's default runtime."""
    openagent_k8s_api_timeout: float = Field(default=10.0, gt=0)
    """Seconds per Kubernetes API or pool runner request."""

    @field_validator("openagent_llm_context_windows")
    @classmethod
    def _context_windows(cls, value: str | None) -> str | None:
        parse_windows(value)  # refused at start when malformed
        return value

    @property
    def llm_context_windows(self) -> dict[str, int]:
        """``OPENAGENT_LLM_CONTEXT_WINDOWS`` as ``{model: tokens}``."""
        return parse_windows(self.openagent_llm_context_windows)

    @field_validator("openai_base_url")
    @classmethod
    def _llm_base_url(cls, value: str | None) -> str | None:
        """An ``http://`` or ``https://`` URL with a host (and a valid port), or unset."""
        if value is None or not value.strip():
            return None
        value = value.strip()
        example = "e.g. http://localhost:11434/v1"
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 (raises ValueError for a port out of range)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a URL ({exc}); {example}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http:// or https:// URL with a host; {example}")
        return value

    @field_validator("openagent_agent_url_allow", "openagent_agent_url_deny")
    @classmethod
    def _url_policy_entries(cls, value: str) -> str:
        """Each entry a host name or an address/CIDR (the agent URL policy parses them again)."""
        for raw in value.split(","):
            entry = raw.strip().strip("[]")
            if not entry:
                continue
            try:
                ip_network(entry, strict=False)
            except ValueError:
                name = entry.rstrip(".")
                if not name or any(not (c.isalnum() or c in ".-_") for c in name):
                    raise ValueError(f"{raw.strip()!r} is neither a host name nor an address/CIDR") from None
        return value

    @model_validator(mode="after")
    def _refuse_removed_switches(self) -> Settings:
        for name, what in REMOVED_SWITCHES.items():
            if os.environ.get(name, "").strip().lower() in ("0", "false", "no", "off"):
                raise ValueError(
                    f"{name} was removed: a key's role now decides who may call {what} (a viewer or "
                    f"agent key may not query; only an admin key builds or restores). Unset {name}"
                )
        return self

    @model_validator(mode="after")
    def _derive_master_base_url(self) -> Settings:
        if not self.master_base_url.strip():
            host = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "[::]": "[::1]"}.get(self.master_host)
            if host is None:
                host = f"[{self.master_host}]" if ":" in self.master_host else self.master_host
            # The model is frozen: set the derived value once, while validating.
            object.__setattr__(self, "master_base_url", f"http://{host}:{self.master_port}")
        return self

    @property
    def llm_configured(self) -> bool:
        """An LLM is configured when an API key or an OpenAI-compatible base URL is set."""
        return bool(self.openai_api_key and self.openai_api_key.get_secret_value()) or bool(
            self.openai_base_url
        )

    @property
    def api_key(self) -> str | None:
        """The master's own API key, or ``None`` when auth is off."""
        if self.openagent_api_key is None:
            return None
        return self.openagent_api_key.get_secret_value() or None

    @property
    def jwt_configured(self) -> bool:
        """Bearer JWTs are accepted when the issuer, the audience and the JWKS URL are all set."""
        return bool(self.openagent_jwt_issuer and self.openagent_jwt_audience and self.openagent_jwt_jwks_url)

    @property
    def mcp_allowed_hosts(self) -> list[str] | None:
        """The ``Host`` values ``/mcp`` accepts, or ``None`` for any (``OPENAGENT_MCP_ALLOWED_HOSTS``)."""
        listed = [host.strip() for host in self.openagent_mcp_allowed_hosts.split(",") if host.strip()]
        if listed:
            return listed
        host = self.master_host
        try:
            loopback = host == "localhost" or ip_address(host.strip("[]")).is_loopback
        except ValueError:
            loopback = False
        return ["127.0.0.1:*", "localhost:*", "[::1]:*"] if loopback else None

    @property
    def llm_endpoint_is_loopback(self) -> bool:
        """Whether the OpenAI-compatible endpoint is on this machine."""
        host = urlsplit(self.openai_base_url or "https://api.openai.com/v1").hostname or ""
        if host == "localhost":
            return True
        try:
            return ip_address(host).is_loopback
        except ValueError:
            return False


def parse_windows(text: str | None) -> dict[str, int]:
    """``"smollm2=8192, llama3.2=131072"`` as a mapping; raises ``ValueError`` naming a bad pair."""
    windows: dict[str, int] = {}
    for pair in (text or "").split(","):
        if not pair.strip():
            continue
        model, sep, tokens = pair.rpartition("=")
        if not sep or not model.strip() or not tokens.strip().isdigit() or int(tokens) <= 0:
            raise ValueError(f"{pair.strip()!r} is not model=tokens (a positive whole number)")
        windows[model.strip()] = int(tokens)
    return windows
