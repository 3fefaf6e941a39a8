"""``/mcp``: the master as an MCP server (Streamable HTTP), for MCP clients.

The route is a plain ASGI endpoint (the MCP SDK's session manager speaks HTTP itself: JSON or
Server-Sent Events, ``GET`` for a 2025 session's stream, ``DELETE`` to end it), kept out of the
OpenAPI document. It needs the ``query`` permission like every door (checked by
:class:`master.access.middleware.AccessMiddleware` before the body is read: 401 with
``WWW-Authenticate: Bearer``, 403 for a role without it) and hands the request to
:class:`master.doors.mcp.McpDoor`, built by the lifespan. The body-size cap is the master's
(``OPENAGENT_HTTP_MAX_BODY_BYTES``, 413 above it).
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from master.access import Permission
from master.access.permissions import mark
from master.auth import resolved_principal, unauthorized
from master.deps import Services

MCP_PATH = "/mcp"
MCP_METHODS = ["GET", "POST", "DELETE"]


class McpEndpoint:
    """The ASGI endpoint of ``/mcp``: the door, for a caller the access middleware admitted."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services: Services = scope["app"].state.services
        if resolved_principal(scope) is None:  # fail closed: nothing admitted the caller
            await unauthorized()(scope, receive, send)
            return
        await services.mcp.handle(scope, receive, send)


def install(app: FastAPI) -> None:
    """Add ``/mcp`` to ``app``'s routes, first: the router (and the early auth check) match it
    without trying every other route's pattern before it (a tenth of the master's CPU per call)."""
    route = Route(MCP_PATH, McpEndpoint(), methods=MCP_METHODS, include_in_schema=False)
    app.router.routes.insert(0, mark(route, Permission.QUERY))
