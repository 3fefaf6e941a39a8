"""The FastAPI application, served by ``python -m master`` (uvicorn ``master.app:app``).

:func:`create_app` declares the routes and the middleware; the long-lived objects (Redis
clients, agent directory, dispatcher, session store, LLM, orchestrator, hub) are built once, in
the lifespan (:mod:`master.lifespan`), and handed to the routes through :mod:`master.deps`.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from master.access import Permission
from master.access.middleware import AccessMiddleware
from master.asgi import JsonDepthGuard, LeanRoutes
from master.deps import needs
from master.doors.a2a.cards import HUB_PATH as A2A_HUB_PATH
from master.errors.responses import install_error_handlers
from master.lifespan import lifespan
from master.llm.model import ChatModel
from master.observability import tracing
from master.openapi import allow_every_method_on_405, document_shared_responses
from master.routes import (
    a2a,
    agents,
    agui,
    approvals,
    attachments,
    builder,
    collaboration,
    health,
    invocation,
    keys,
    lean_callbacks,
    openai,
    query,
    runs,
    ui,
    workspace,
    ws,
)
from master.routes import mcp as mcp_route
from master.routes import metrics as metrics_route
from master.routes import sandbox as sandbox_routes
from master.routes import sessions as session_routes
from master.routes.docs import install_docs
from master.settings import Settings


def create_app(settings: Settings | None = None, *, llm: ChatModel | None = None) -> FastAPI:
    """Build the master. ``llm`` replaces the configured provider (tests, benchmarks)."""
    settings = settings or Settings()

    # The API docs (/docs, /redoc) and the document they render (/openapi.json) are open even
    # with an API key: they describe routes that each need the key, and reveal no data. The
    # docs page's "Authorize" button takes the key for "Try it out".
    app = FastAPI(
        title="OpenAgent master",
        version="0.1.0",
        lifespan=lifespan(settings, llm),
        max_body_size=settings.openagent_http_max_body_bytes,  # larger bodies get 413
        # FastAPI's own request spans, metrics and logs follow the master's OTEL_* switch: off,
        # no request asks the OpenTelemetry providers whether anyone listens.
        telemetry=None if tracing.enabled(settings) else {"tracing": False, "metrics": False, "logs": False},
        docs_url=None,  # served offline by master.routes.docs
        redoc_url=None,
    )
    install_docs(app)

    # Every route declares the permission it needs, here for a whole router or on the route
    # itself (master.access.permissions; the Security page's roles table is generated from them).
    app.include_router(health.router, dependencies=needs(Permission.OPEN))
    app.include_router(agents.router, dependencies=needs(Permission.READ))
    app.include_router(query.router)
    app.include_router(openai.router, dependencies=needs(Permission.QUERY))
    app.include_router(agui.router, dependencies=needs(Permission.QUERY))
    app.include_router(attachments.router)
    app.include_router(attachments.blobs)
    app.include_router(collaboration.router, dependencies=needs(Permission.ADMIN))
    app.include_router(builder.router)
    app.include_router(workspace.router)
    app.include_router(session_routes.router, dependencies=needs(Permission.QUERY))
    app.include_router(approvals.router, dependencies=needs(Permission.QUERY))
    app.include_router(runs.router, dependencies=needs(Permission.QUERY))
    app.include_router(sandbox_routes.router)
    app.include_router(metrics_route.router, dependencies=needs(Permission.ADMIN))
    app.include_router(keys.admin)
    app.include_router(keys.anyone)
    app.include_router(invocation.router)
    app.include_router(invocation.callbacks)
    ws.install(app)
    # The A2A JSON-RPC endpoints first: a request walks the route table (master/routes/a2a.py).
    a2a_first, a2a_rest = a2a.routes(public_cards=settings.openagent_a2a_public_cards)
    app.router.routes[0:0] = a2a_first
    app.router.routes.extend(a2a_rest)
    mcp_route.install(app)
    ui_dist = ui.ui_directory(settings.openagent_ui_dir)
    if ui_dist is not None:
        ui.mount_ui(app, ui_dist)
    document_shared_responses(app)
    install_error_handlers(app, refusal=openai.refusal)
    allow_every_method_on_405(app)
    # Inside the access check: a body nested too deeply is read (and refused 400, in each door's
    # shape) only for a caller who may use the route; the lean routes decline such a body to it.
    app.add_middleware(
        JsonDepthGuard, refusal=openai.refusal, jsonrpc_paths=(mcp_route.MCP_PATH, A2A_HUB_PATH)
    )
    # 401/403 before a route reads its body (FastAPI parses the body before dependencies).
    app.add_middleware(
        AccessMiddleware,
        api_key=settings.api_key,
        routes=lambda: list(iter_route_contexts(app.routes)),
        refusal=openai.refusal,
    )
    # Added last, so the outermost of ours: the plain case of the hottest routes skips the rest
    # (master/asgi.py). Every middleware added above sits inside it, where the lean routes skip it:
    # tests/master/test_asgi.py pins the stack.
    app.add_middleware(
        LeanRoutes,
        routes={
            ("POST", "/query"): (query.lean_post_query, Permission.QUERY),
            ("POST", "/v1/chat/completions"): (openai.lean_chat_completions, Permission.QUERY),
            ("POST", "/v1/responses"): (openai.lean_responses, Permission.QUERY),
            ("POST", "/tool_callback"): (lean_callbacks.lean_tool_callback, Permission.CALL_TOKEN),
        },
        api_key=settings.api_key,
        max_body_size=settings.openagent_http_max_body_bytes,
    )
    return app


app = create_app()
