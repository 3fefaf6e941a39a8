"""``/mcp``: the master as an MCP server (Streamable HTTP), for MCP clients.

The route is a plain ASGI endpoint (the MCP SDK's session manager speaks HTTP itself: JSON or
Server-Sent Events, ``GET`` for a 2025 session's stream, ``DELETE`` to end it), kept out of the
OpenAPI document. It checks the API key like every route (:func:`master.auth.authorized`, 401
with ``WWW-Authenticate: Bearer``) and hands the request to
:class:`master.doors.mcp.McpDoor`, built by the lifespan. The body-size cap is the master's
(``OPENAGENT_HTTP_MAX_BODY_BYTES``, 413 above it).
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from master.auth import authorized, unauthorized
from master.deps import Services

MCP_PATH = "/mcp"
MCP_METHODS = ["GET", "POST", "DELETE"]


class McpEndpoint:
    """The ASGI endpoint of ``/mcp``: the key check, then the door."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services: Services = scope["app"].state.services
        if not authorized(scope, services.settings.api_key):
            await unauthorized()(scope, receive, send)
            return
        await services.mcp.handle(scope, receive, send)


def install(app: FastAPI) -> None:
    """Add ``/mcp`` to ``app``'s routes, first: the router (and the early auth check) match it
    without trying every other route's pattern before it (a tenth of the master's CPU per call)."""
    app.router.routes.insert(0, Route(MCP_PATH, McpEndpoint(), methods=MCP_METHODS, include_in_schema=False))
