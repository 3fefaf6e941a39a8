"""Building the master's long-lived objects (:func:`build`): the Redis clients, the HTTP clients,
the agent directory, the dispatcher, the session store, the LLM, the orchestrator, the query
service, the hub, the doors and the cluster members, in dependency order, each entered into one
:class:`~contextlib.AsyncExitStack` as soon as it holds something to close. Leaving the stack
closes them in reverse order, on shutdown and just as well when start-up fails half-way (a
cluster that cannot start leaks no connection pool).

Where the order of closing matters more than the order of building, a close is entered later
than its object is built, with the reason beside it. What runs in the background is started
last, by :func:`master.lifespan.start.start`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from contextlib import AsyncExitStack

from aiohttp import ClientSession
from httpx import AsyncClient

from master.access import Authenticator, KeyStore
from master.access.oidc import JwtVerifier
from master.agents.call_records import CallRecords
from master.agents.catalog import ToolCatalog, ToolLimits
from master.agents.directory import AgentDirectory
from master.agents.dispatch import Dispatcher
from master.agents.invocation import InvocationAgents
from master.agents.registry import Registry
from master.agents.tool_calls import ToolCaller
from master.agents.url_policy import AgentUrlPolicy
from master.attachments import AttachmentStore, RagLink
from master.builder.credentials import AgentKeys
from master.builder.service import AgentBuilder
from master.cluster.collaboration import ClusterCollaborations
from master.cluster.directory import ClusterDirectory
from master.cluster.router import ClusterOutbox, ClusterRouter
from master.collaboration import CollaborationManager, CollabStore
from master.collaboration.remote import RemoteMembersFactory
from master.conversation.approvals import ApprovalStore
from master.conversation.store import SessionStore
from master.deps import Services
from master.doors.a2a import A2ADoor
from master.doors.agui import AgUiDoor
from master.doors.mcp import McpDoor
from master.doors.openai import OpenAIDoor
from master.doors.openai.responses import ResponsesDoor
from master.gateway.drain import Drain
from master.gateway.hub import Hub
from master.lifespan.start import cancel_any, report_sandbox, settle, start
from master.llm.model import ChatModel, OpenAIChatModel
from master.llm.tokens import encoding
from master.llm.windows import ContextWindows, calibration_sample, server_tokenizer
from master.observability import logs, tracing
from master.observability.chat import InstrumentedChatModel
from master.observability.metrics import Metrics, count_redis_errors
from master.observability.redaction import install_log_filter
from master.orchestration.model_catalog import ModelCatalog
from master.orchestration.orchestrator import Orchestrator
from master.orchestration.prompts import system_prompt
from master.query.admission import Admission
from master.query.approvals import ApprovalDesk
from master.query.entry import QueryEntry
from master.query.service import NOT_CONFIGURED, QueryService
from master.runs.a2a_tasks import RedisEventStream, RedisTaskStore
from master.runs.cancel import RunCanceller
from master.runs.responses import ResponseStore
from master.runs.store import RunStore
from master.sandbox import create_sandbox
from master.sandbox.spawn import Spawner, saved_websocket_agents
from master.settings import Settings
from master.storage.redis_client import create_redis, unreachable

__all__ = ["build", "llm_from_settings"]

logger = logging.getLogger("master.app")


def llm_from_settings(settings: Settings) -> tuple[ChatModel | None, str]:
    """The configured LLM, or ``None`` and the reason there is none."""
    if not settings.llm_configured:
        return None, NOT_CONFIGURED
    if settings.openagent_llm_loopback_only and not settings.llm_endpoint_is_loopback:
        return None, (
            f"LLM endpoint {settings.openai_base_url or 'https://api.openai.com/v1'!r} refused: "
            "OPENAGENT_LLM_LOOPBACK_ONLY=1 allows only an OpenAI-compatible server on this machine"
        )
    return OpenAIChatModel.from_settings(settings), ""


def _access(stack: AsyncExitStack, settings: Settings, keys: KeyStore) -> Authenticator:
    """The caller resolver: the bootstrap key, the stored keys, and JWTs when OIDC is configured."""
    verifier = None
    if settings.jwt_configured:
        jwks_http = AsyncClient()  # the identity provider's JWKS: the operator's URL, not an agent's
        stack.push_async_callback(jwks_http.aclose)
        verifier = JwtVerifier(
            issuer=settings.openagent_jwt_issuer,
            audience=settings.openagent_jwt_audience,
            jwks_url=settings.openagent_jwt_jwks_url,
            http=jwks_http,
            role_claim=settings.openagent_jwt_role_claim,
            tenant_claim=settings.openagent_jwt_tenant_claim,
            max_lifetime_seconds=settings.openagent_jwt_max_lifetime_seconds,
        )
    return Authenticator(settings.api_key, keys, verifier)


def _new_master_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


async def build(stack: AsyncExitStack, settings: Settings, llm: ChatModel | None = None) -> Services:
    """Build the master's long-lived objects, entering each into ``stack`` as it is built.

    ``llm`` replaces the configured provider (tests, benchmarks); it stays the caller's to close.
    """
    logs.configure(settings.openagent_log_format)
    tracer_provider = tracing.setup(settings)
    if tracer_provider is not None:
        provider = tracer_provider

        def shut_tracing_down() -> None:
            tracing.install(None)
            provider.shutdown()

        stack.callback(shut_tracing_down)
    metrics = Metrics()
    install_log_filter([settings.api_key])  # no key or per-call token in any log line
    blob_redis = create_redis(settings.redis_url, decode_responses=False, max_connections=16)
    stack.push_async_callback(blob_redis.aclose)
    redis = create_redis(settings.redis_url)
    stack.push_async_callback(redis.aclose)
    count_redis_errors(redis, metrics.redis_errors)
    if (problem := await unreachable(redis)) is not None:
        logger.warning(
            "Redis at %s is not answering (%s): queries will fail until it does", settings.redis_url, problem
        )
    chat_model, reason = (llm, "") if llm is not None else llm_from_settings(settings)
    if chat_model is None:
        logger.warning("%s", reason)
    elif llm is None and isinstance(chat_model, OpenAIChatModel):
        stack.push_async_callback(chat_model.aclose)
    # aiohttp: on the invocation path it costs the master a fraction of httpx's CPU per call (bench/).
    # Every request it makes passes the agent URL policy in its connector: names through its
    # resolver, the host by name (IP literals, which aiohttp never resolves) before each request
    # and each redirect.
    url_policy = AgentUrlPolicy.from_settings(settings)
    http = ClientSession(connector=url_policy.aiohttp_connector(limit=256), raise_for_status=False)
    stack.push_async_callback(http.close)

    keys = KeyStore(redis)
    registry = Registry()
    invocation = InvocationAgents(
        redis,
        http,
        ttl_seconds=settings.redis_agent_ttl_seconds,
        health_timeout=settings.health_check_timeout,
        settings=settings,
        url_policy=url_policy,
    )
    stack.push_async_callback(invocation.aclose)  # the MCP and A2A connectors
    master_id = settings.openagent_master_id or _new_master_id()
    cluster = (
        ClusterDirectory(
            redis,
            registry,
            master_id=master_id,
            base_url=settings.master_base_url,
            lease_seconds=settings.openagent_master_lease_seconds,
        )
        if settings.openagent_cluster
        else None
    )
    outbox = ClusterOutbox(redis, cluster) if cluster is not None else None
    agents = AgentDirectory(registry, invocation, cluster)
    dispatcher = Dispatcher(
        http=http,
        invocation=invocation,
        master_base_url=settings.master_base_url,
        call_timeout=settings.tool_call_timeout,
        invoke_timeout=settings.tool_invoke_http_timeout,
        inflight_health_interval=settings.openagent_inflight_health_interval,
        records=CallRecords(
            redis,
            master_id=master_id,
            session_ttl_seconds=settings.redis_session_ttl_seconds,
            max_result_bytes=settings.openagent_max_tool_result_bytes,
        ),
        remote=outbox,
        max_result_bytes=settings.openagent_max_tool_result_bytes,
        progress_per_second=settings.openagent_max_progress_per_second,
    )
    stack.push_async_callback(dispatcher.aclose)
    router = (
        ClusterRouter(redis, cluster, dispatcher, registry, outbox)
        if cluster is not None and outbox is not None
        else None
    )
    cluster_collab: ClusterCollaborations | None = None
    remote_members: RemoteMembersFactory | None = None
    if cluster is not None and router is not None:
        directory, inbox = cluster, router

        def remote_members(manager: CollaborationManager) -> ClusterCollaborations:
            nonlocal cluster_collab
            cluster_collab = ClusterCollaborations(
                manager,
                registry,
                directory,
                inbox,
                redis,
                lease_seconds=settings.openagent_master_lease_seconds,
            )
            return cluster_collab

    sessions = SessionStore(
        redis,
        ttl_seconds=settings.redis_session_ttl_seconds,
        timeout_seconds=settings.redis_query_timeout_seconds,
    )
    runs = RunStore(
        redis,
        master_id=master_id,
        lease_seconds=settings.openagent_run_lease_seconds,
        keep_seconds=settings.redis_session_ttl_seconds,
        timeout_seconds=settings.redis_query_timeout_seconds,
    )
    runs.start()
    # Closed after the query entry (entered before it): the runs it cancelled are recorded failed.
    stack.push_async_callback(runs.aclose)
    attachment_store = AttachmentStore(
        blob_redis,
        ttl_seconds=settings.redis_session_ttl_seconds,
        session_max_bytes=settings.openagent_session_attachment_max_bytes,
    )
    rag = RagLink(
        attachment_store,
        call_timeout=settings.rag_tool_call_timeout,
        http_timeout=settings.rag_tool_http_timeout,
    )
    catalog = ModelCatalog(settings)
    collab = CollaborationManager.from_settings(
        settings,
        registry,
        CollabStore(redis, ttl_seconds=settings.openagent_collab_session_ttl),
        sessions,
        remote=remote_members,
    )
    tool_catalog = ToolCatalog(agents, ToolLimits.from_settings(settings))
    agent_builder = AgentBuilder.build(settings, agents, chat_model, reason, tool_catalog, keys)
    stack.push_async_callback(agent_builder.aclose)
    # The YAML agents this master ran before a restart: they connect once it listens.
    resumed = asyncio.create_task(agent_builder.workspaces.resume(), name="yaml-agents-resume")
    stack.push_async_callback(cancel_any, resumed)
    # The sandbox's own httpx client: pool runner calls are few; the invocation path keeps aiohttp.
    sandbox_http = AsyncClient(timeout=settings.openagent_k8s_api_timeout)
    stack.push_async_callback(sandbox_http.aclose)
    sandbox = create_sandbox(settings, redis, sandbox_http, AgentKeys(keys))
    stack.callback(sandbox.close)
    await report_sandbox(sandbox)
    queries = QueryService(
        settings=settings,
        agents=agents,
        sessions=sessions,
        catalog=catalog,
        orchestrator=(
            Orchestrator(
                InstrumentedChatModel(chat_model, metrics),
                dispatcher,
                auto_max_steps=settings.orchestrator_auto_max_steps,
                metrics=metrics,
            )
            if chat_model is not None
            else None
        ),
        unavailable_reason=reason,
        collaboration=collab,
        windows=_context_windows(settings, chat_model, metrics),
        rag=rag,
        spawner=(
            Spawner(
                sandbox,
                registry,
                lambda: saved_websocket_agents(agent_builder.discovery),
                wait_seconds=settings.orchestrator_auto_spawn_wait_seconds,
            )
            if sandbox.enabled
            else None
        ),
        metrics=metrics,
        approvals=ApprovalStore(
            redis,
            ttl_seconds=settings.openagent_approval_ttl_seconds,
            timeout_seconds=settings.redis_query_timeout_seconds,
            session_ttl_seconds=settings.redis_session_ttl_seconds,
        ),
        runs=runs,
    )
    admission = Admission(
        settings.openagent_max_queries_in_flight,
        tenant_limit=settings.openagent_tenant_max_concurrent_queries,
    )
    canceller = RunCanceller(
        runs,
        redis,
        sessions=sessions,
        approvals=queries.approvals,
        timeout_seconds=settings.redis_query_timeout_seconds,
    )
    entry = QueryEntry(
        queries,
        admission,
        agents=agents,
        tools=ToolCaller(dispatcher, metrics),
        runs=runs,
        canceller=canceller,
    )
    approvals = ApprovalDesk(entry, metrics=metrics, keys=keys)
    hub = Hub(
        registry,
        dispatcher,
        invocation,
        entry,
        max_message_bytes=settings.openagent_ws_max_message_bytes,
        collaboration=collab,
        max_queries_per_connection=settings.openagent_ws_max_queries_per_connection,
        catalog=tool_catalog,
    )
    # The A2A door's own client: its tasks are binary protobuf (bytes), its pool apart from the queries'.
    a2a_redis = create_redis(settings.redis_url, decode_responses=False)
    stack.push_async_callback(a2a_redis.aclose)
    count_redis_errors(a2a_redis, metrics.redis_errors)
    a2a_tasks = RedisTaskStore(a2a_redis, ttl_seconds=settings.redis_session_ttl_seconds, runs=entry.runs)
    a2a = A2ADoor(
        entry,
        agents,
        a2a_tasks,
        RedisEventStream(a2a_redis, a2a_tasks),
        approvals=approvals,
        public_cards=settings.openagent_a2a_public_cards,
    )
    warm_up = asyncio.create_task(asyncio.to_thread(encoding))  # builds the tokenizer off the event loop
    stack.push_async_callback(settle, warm_up)
    stack.push_async_callback(entry.aclose)  # cancels the runs every door started
    # Closed before the entry: the A2A tasks still running end (their runs cancelled) first.
    stack.push_async_callback(a2a.aclose)
    a2a.start()
    # Closed before the A2A door: a resumed run's end is no longer waited for, then the door goes.
    stack.push_async_callback(approvals.aclose)
    approvals.start(settings.openagent_approval_sweep_seconds)
    responses = ResponsesDoor(
        entry,
        settings,
        ResponseStore(
            redis,
            ttl_seconds=settings.redis_session_ttl_seconds,
            timeout_seconds=settings.redis_query_timeout_seconds,
        ),
        approvals=approvals,
        master_id=master_id,
    )
    # Closed before the entry: a background response's end is no longer waited for (its run's
    # record says how it ended: GET /v1/responses/{id} reads it).
    stack.push_async_callback(responses.aclose)
    # Entered after the query entry, so closed before it: running sessions end with
    # "shutdown" while the queries that started them are still there to hear it.
    stack.push_async_callback(collab.aclose)
    drain = Drain(
        seconds=settings.openagent_drain_seconds,
        admission=admission,
        dispatcher=dispatcher,
        hub=hub,
        name=f"master {cluster.master_id!r}" if cluster is not None else "the master",
    )
    mcp = McpDoor(
        entry,
        max_body_bytes=settings.openagent_http_max_body_bytes,
        max_sessions=settings.openagent_mcp_max_sessions,
        session_idle_seconds=settings.openagent_mcp_session_idle_seconds,
        check_interval=settings.openagent_mcp_tools_check_seconds,
        allowed_hosts=settings.mcp_allowed_hosts,
        approvals=approvals,
    )
    registry.listeners.append(mcp.tools_changed)  # an agent joined or left this master
    services = Services(
        settings,
        catalog,
        registry,
        invocation,
        dispatcher,
        sessions,
        queries,
        hub,
        collaboration=collab,
        entry=entry,
        builder=agent_builder,
        sandbox=sandbox,
        agents=agents,
        mcp=mcp,
        a2a=a2a,
        attachments=attachment_store,
        tool_catalog=tool_catalog,
        metrics=metrics,
        cluster=cluster,
        cluster_router=router,
        drain=drain,
        openai=OpenAIDoor(entry, agents, settings),
        agui=AgUiDoor(entry, approvals),
        responses=responses,
        approvals=approvals,
        access=_access(stack, settings, keys),
        keys=keys,
    )
    await start(
        stack,
        settings,
        keys=keys,
        invocation=invocation,
        cluster=cluster,
        router=router,
        cluster_collab=cluster_collab,
        mcp=mcp,
        drain=drain,
        metrics=metrics,
        agents=agents,
        dispatcher=dispatcher,
        collab=collab,
    )
    logger.info(
        "master ready (auth %s, models %s)", "on" if settings.api_key else "OFF", catalog.allowed_models
    )
    return services


def _context_windows(settings: Settings, chat_model: ChatModel | None, metrics: Metrics) -> ContextWindows:
    """The context budget per model: configured windows, else what the OpenAI-compatible server
    reports (:mod:`master.llm.windows`)."""
    reported = None
    tokenize = None
    if isinstance(chat_model, OpenAIChatModel):
        endpoint = chat_model.endpoint

        async def reported_window() -> int | None:
            return (await endpoint.compat()).context_size

        reported = reported_window
        tokenize = server_tokenizer(endpoint)
    windows = ContextWindows(
        default_budget=settings.orchestrator_context_max_tokens,
        output_tokens=settings.openagent_llm_max_tokens,
        configured=settings.llm_context_windows,
        reported=reported,
        tokenize=tokenize,
        sample=calibration_sample(system_prompt("default")),
    )
    metrics.live(
        "openagent_llm_token_ratio",
        "Tokens of the model's own tokenizer per token the master counts, as its server's tokenizer "
        "calibrated it, by model.",
        lambda: {(model,): ratio for model, ratio in windows.ratios().items()},
        ["model"],
    )
    return windows
