"""The FastAPI application, served by ``python -m master`` (uvicorn ``master.app:app``).

:func:`create_app` builds the long-lived objects (Redis client, registry,
dispatcher, session store, LLM, orchestrator, hub) once, in the lifespan, and
hands them to the routes through :mod:`master.deps`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import httpx
from fastapi import Depends, FastAPI
from fastapi.routing import iter_route_contexts
from redis.exceptions import RedisError

from master.agents.call_records import CallRecords
from master.agents.catalog import ToolCatalog, ToolLimits
from master.agents.dispatch import Dispatcher
from master.agents.invocation import InvocationAgents
from master.agents.registry import Registry
from master.asgi import LeanRoutes
from master.attachments import AttachmentStore, RagLink
from master.auth import EarlyAuthMiddleware
from master.builder.service import AgentBuilder
from master.cluster.collaboration import ClusterCollaborations
from master.cluster.directory import ClusterDirectory
from master.cluster.router import ClusterRouter
from master.collaboration import CollaborationManager, CollabStore
from master.conversation.store import SessionStore
from master.deps import Services, needs_api_key, require_api_key
from master.drain import Drain, hook_sigterm
from master.errors import SessionStoreUnavailable
from master.gateway.hub import Hub
from master.observability import logs, tracing
from master.observability.chat import InstrumentedChatModel
from master.observability.metrics import Metrics, count_redis_errors
from master.observability.redaction import install_log_filter
from master.openapi import allow_every_method_on_405, document_shared_responses
from master.orchestration.llm import ChatModel, OpenAIChatModel
from master.orchestration.model_catalog import ModelCatalog
from master.orchestration.orchestrator import Orchestrator
from master.orchestration.tokens import encoding
from master.query.admission import Admission
from master.query.entry import QueryEntry
from master.query.service import NOT_CONFIGURED, QueryService
from master.redis_client import create_redis
from master.routes import (
    agents,
    attachments,
    builder,
    collaboration,
    health,
    invocation,
    lean_callbacks,
    query,
    ui,
    workspace,
    ws,
)
from master.routes import metrics as metrics_route
from master.routes import sandbox as sandbox_routes
from master.routes import sessions as session_routes
from master.sandbox import Sandbox, create_sandbox
from master.sandbox.spawn import Spawner, saved_websocket_agents
from master.settings import Settings

logger = logging.getLogger("master.app")


def _llm_from_settings(settings: Settings) -> tuple[ChatModel | None, str]:
    """The configured LLM, or ``None`` and the reason there is none."""
    if not settings.llm_configured:
        return None, NOT_CONFIGURED
    if settings.openagent_llm_loopback_only and not settings.llm_endpoint_is_loopback:
        return None, (
            f"LLM endpoint {settings.openai_base_url or 'https://api.openai.com/v1'!r} refused: "
            "OPENAGENT_LLM_LOOPBACK_ONLY=1 allows only an OpenAI-compatible server on this machine"
        )
    return OpenAIChatModel.from_settings(settings), ""


async def _load_invocation_agents(invocation: InvocationAgents) -> None:
    """Start-up: read the invocation agents from Redis and health-check them."""
    try:
        await invocation.reload()
    except SessionStoreUnavailable as exc:
        logger.warning("could not load invocation agents: %s", exc)
        return
    if invocation.all():
        await invocation.check_all()


async def _health_loop(invocation: InvocationAgents, interval: float) -> None:
    """Re-check invocation agents periodically, so a DOWN agent comes back without /refresh."""
    while True:
        await asyncio.sleep(interval)
        try:
            await invocation.check_all()
        except Exception:  # the loop must survive anything a check throws
            logger.exception("background health check failed")


async def _report_sandbox(sandbox: Sandbox) -> None:
    """Start-up: say whether the sandbox is on and its cluster answers; never fails the start."""
    if not sandbox.enabled:
        logger.info("Kubernetes sandbox off (OPENAGENT_K8S_SANDBOX=0)")
        return
    cluster = (await sandbox.status())["cluster"]
    if cluster["reachable"]:
        logger.info("Kubernetes sandbox on: %s (%s)", cluster["server"], cluster["version"])
    else:
        logger.warning("Kubernetes sandbox on, but no cluster: %s", cluster["reason"])


def _new_master_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _live_metrics(
    metrics: Metrics,
    registry: Registry,
    invocation: InvocationAgents,
    dispatcher: Dispatcher,
    collab: CollaborationManager,
) -> None:
    """The series read from live state at scrape time."""
    metrics.live(
        "openagent_connected_agents",
        "Agents this master serves, by transport (WebSocket connections, registered invocation agents).",
        lambda: {("websocket",): len(registry.all()), ("http",): len(invocation.all())},
        ["transport"],
    )
    metrics.live(
        "openagent_tool_calls_in_flight", "Tool calls waiting for their result.", lambda: dispatcher.in_flight
    )
    metrics.live(
        "openagent_collaboration_sessions_active",
        "Collaboration sessions running.",
        lambda: collab.active_count,
    )
    metrics.live(
        "openagent_collaborations",
        "Collaboration sessions ended, by reason.",
        lambda: {(reason,): count for reason, count in collab.ended_by_reason.items()},
        ["reason"],
        counter=True,
    )


def create_app(settings: Settings | None = None, *, llm: ChatModel | None = None) -> FastAPI:
    """Build the master. ``llm`` replaces the configured provider (tests, benchmarks)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        logs.configure(settings.openagent_log_format)
        tracer_provider = tracing.setup(settings)
        metrics = Metrics()
        install_log_filter([settings.api_key])  # no key or per-call token in any log line
        redis = create_redis(settings.redis_url)
        count_redis_errors(redis, metrics.redis_errors)
        try:
            await redis.ping()
        except RedisError as exc:
            logger.warning(
                "Redis at %s is not answering (%s): queries will fail until it does", settings.redis_url, exc
            )
        chat_model, reason = (llm, "") if llm is not None else _llm_from_settings(settings)
        if chat_model is None:
            logger.warning("%s", reason)
        # aiohttp: on the invocation path it costs the master a fraction of httpx's CPU per call (bench/).
        http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256), raise_for_status=False)
        registry = Registry()
        invocation = InvocationAgents(
            redis,
            http,
            ttl_seconds=settings.redis_agent_ttl_seconds,
            health_timeout=settings.health_check_timeout,
        )
        master_id = settings.openagent_master_id or _new_master_id()
        dispatcher = Dispatcher(
            http=http,
            invocation=invocation,
            master_base_url=settings.master_base_url,
            call_timeout=settings.tool_call_timeout,
            invoke_timeout=settings.tool_invoke_http_timeout,
            inflight_health_interval=settings.openagent_inflight_health_interval,
            records=CallRecords(
                redis, master_id=master_id, session_ttl_seconds=settings.redis_session_ttl_seconds
            ),
        )
        sessions = SessionStore(redis, ttl_seconds=settings.redis_session_ttl_seconds)
        blob_redis = create_redis(settings.redis_url, decode_responses=False, max_connections=16)
        attachment_store = AttachmentStore(blob_redis, ttl_seconds=settings.redis_session_ttl_seconds)
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
        )
        # The sandbox's own httpx client: pool runner calls are few; the invocation path keeps aiohttp.
        tool_catalog = ToolCatalog(registry, invocation, ToolLimits.from_settings(settings))
        agent_builder = AgentBuilder.build(settings, registry, invocation, chat_model, reason, tool_catalog)
        sandbox_http = httpx.AsyncClient(timeout=settings.openagent_k8s_api_timeout)
        sandbox = create_sandbox(settings, redis, sandbox_http)
        await _report_sandbox(sandbox)
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
        queries = QueryService(
            settings=settings,
            registry=registry,
            invocation=invocation,
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
            cluster=cluster,
        )
        admission = Admission(settings.openagent_max_queries_in_flight)
        entry = QueryEntry(queries, admission)
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
        drain = Drain(
            seconds=settings.openagent_drain_seconds,
            admission=admission,
            dispatcher=dispatcher,
            hub=hub,
            name=f"master {cluster.master_id!r}" if cluster is not None else "the master",
        )
        warm_up = asyncio.create_task(asyncio.to_thread(encoding))  # builds the tokenizer off the event loop
        app.state.services = Services(
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
            attachments=attachment_store,
            tool_catalog=tool_catalog,
            metrics=metrics,
            cluster=cluster,
            drain=drain,
        )
        router = ClusterRouter(redis, cluster, dispatcher, registry) if cluster is not None else None
        app.state.services.cluster_router = router
        cluster_collab = (
            ClusterCollaborations(
                collab,
                registry,
                cluster,
                router,
                redis,
                lease_seconds=settings.openagent_master_lease_seconds,
            )
            if cluster is not None and router is not None
            else None
        )
        if cluster is not None and router is not None:
            await cluster.start()
            await router.start()
        if cluster_collab is not None:
            cluster_collab.start()
        _live_metrics(metrics, registry, invocation, dispatcher, collab)
        await _load_invocation_agents(invocation)
        health_loop = (
            asyncio.create_task(_health_loop(invocation, settings.openagent_health_check_interval))
            if settings.openagent_health_check_interval > 0
            else None
        )
        unhook_sigterm = hook_sigterm(drain)
        if unhook_sigterm is None:
            logger.info("SIGTERM is not uvicorn's to handle here: the master will stop without draining")
        logger.info(
            "master ready (auth %s, models %s)", "on" if settings.api_key else "OFF", catalog.allowed_models
        )
        try:
            yield
        finally:
            if unhook_sigterm is not None:
                unhook_sigterm()
            if drain.task is not None and not drain.task.done():  # SIGINT or a second SIGTERM cut it short
                drain.task.cancel()
                await asyncio.gather(drain.task, return_exceptions=True)
            if health_loop is not None:
                health_loop.cancel()
                await asyncio.gather(health_loop, return_exceptions=True)
            if cluster_collab is not None:
                await cluster_collab.aclose()
            if router is not None:
                await router.aclose()
            if cluster is not None:
                await cluster.aclose()
            await app.state.services.builder.aclose()
            await collab.aclose()
            await entry.aclose()
            await sandbox_http.aclose()
            sandbox.close()
            await asyncio.gather(warm_up, return_exceptions=True)
            await dispatcher.aclose()
            await http.close()
            if isinstance(chat_model, OpenAIChatModel) and llm is None:
                await chat_model.aclose()
            await redis.aclose()
            await blob_redis.aclose()
            if tracer_provider is not None:
                tracing.install(None)
                tracer_provider.shutdown()

    # The API docs (/docs, /redoc) and the document they render (/openapi.json) are open even
    # with an API key: they describe routes that each need the key, and reveal no data. The
    # docs page's "Authorize" button takes the key for "Try it out".
    app = FastAPI(
        title="OpenAgent master",
        version="0.1.0",
        lifespan=lifespan,
        max_body_size=settings.openagent_http_max_body_bytes,  # larger bodies get 413
    )

    app.include_router(health.router)
    protected = [Depends(require_api_key)]
    app.include_router(agents.router, dependencies=protected)
    app.include_router(query.router, dependencies=protected)
    app.include_router(attachments.router)
    app.include_router(attachments.blobs)
    app.include_router(collaboration.router, dependencies=protected)
    app.include_router(builder.router, dependencies=protected)
    app.include_router(workspace.router, dependencies=protected)
    app.include_router(session_routes.router, dependencies=protected)
    app.include_router(sandbox_routes.router, dependencies=protected)
    app.include_router(metrics_route.router, dependencies=protected)
    app.include_router(invocation.router)
    app.include_router(invocation.callbacks)
    app.include_router(ws.router)
    ui_dist = ui.ui_directory(settings.openagent_ui_dir)
    if ui_dist is not None:
        ui.mount_ui(app, ui_dist)
    document_shared_responses(app)
    allow_every_method_on_405(app)
    # 401 before a protected route reads its body (FastAPI parses the body before dependencies).
    app.add_middleware(
        EarlyAuthMiddleware,
        api_key=settings.api_key,
        routes=lambda: list(iter_route_contexts(app.routes)),
        protected=needs_api_key,
    )
    # Added last, so the outermost of ours: the plain case of the hottest routes skips the rest
    # (master/asgi.py). Every middleware added above sits inside it, where the lean routes skip it:
    # tests/master/test_asgi.py pins the stack.
    app.add_middleware(
        LeanRoutes,
        routes={
            ("POST", "/query"): query.lean_post_query,
            ("POST", "/tool_callback"): lean_callbacks.lean_tool_callback,
        },
        api_key=settings.api_key,
        max_body_size=settings.openagent_http_max_body_bytes,
    )
    return app


app = create_app()
