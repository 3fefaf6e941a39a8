"""``/ws``: the WebSocket hub's endpoint.

The caller is resolved at connect (the bootstrap key, a stored key or a JWT, as a header or
``?token=``): without valid credentials, or with a role that may do nothing over ``/ws``
(``viewer``), the connection is closed with 1008. The hub then checks each frame against the
caller's role (:mod:`master.gateway.frames`).
"""

from __future__ import annotations

from fastapi import FastAPI, WebSocket

from master.access import Permission, permits
from master.access.permissions import forbidden_message, mark
from master.auth import set_principal
from master.deps import Services
from master.errors import SessionStoreUnavailable
from protocol import CLOSE_POLICY_VIOLATION


async def websocket_endpoint(websocket: WebSocket) -> None:
    services: Services = websocket.app.state.services
    await websocket.accept()
    access = services.access
    try:
        principal = await access.resolve(websocket.scope) if access is not None else None
    except SessionStoreUnavailable:
        await websocket.close(code=1011, reason="cannot check the API key: Redis unavailable")
        return
    if principal is None:
        await websocket.close(code=CLOSE_POLICY_VIOLATION, reason="missing or invalid API key")
        return
    if not permits(principal, Permission.CONNECT):
        reason = forbidden_message(principal, Permission.CONNECT, "/ws")
        await websocket.close(code=CLOSE_POLICY_VIOLATION, reason=reason[:120])
        return
    set_principal(websocket.scope, principal)
    await services.hub.serve(websocket)


def install(app: FastAPI) -> None:
    """Add ``/ws`` to ``app``, declaring :attr:`Permission.CONNECT` (the roles that may connect)."""
    app.add_api_websocket_route("/ws", websocket_endpoint)
    mark(app.router.routes[-1], Permission.CONNECT)
