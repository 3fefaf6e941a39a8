"""``/ws``: the WebSocket hub's endpoint."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from master.auth import authorized
from master.deps import Services
from protocol import CLOSE_POLICY_VIOLATION

router = APIRouter()


@router.websocket("/ws")
async def websocket_endpoint(websocket: WebSocket) -> None:
    services: Services = websocket.app.state.services
    await websocket.accept()
    if not authorized(websocket.scope, services.settings.api_key):
        await websocket.close(code=CLOSE_POLICY_VIOLATION, reason="missing or invalid API key")
        return
    await services.hub.serve(websocket)
