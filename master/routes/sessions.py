"""``GET /sessions/{session_id}`` and ``DELETE /sessions/{session_id}``: read or forget a conversation.

The web UI reads a session's turns to show a transcript, and deletes the server-side
session when the user starts a new one. Both need the API key (the router is included
with it).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, status

from master.deps import ServicesDep
from master.errors import SessionStoreUnavailable

router = APIRouter(tags=["sessions"])

SessionId = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9_-]{1,128}$", description="A session_id from POST /query")
]


@router.get("/sessions/{session_id}")
async def read_session(session_id: SessionId, services: ServicesDep) -> dict[str, Any]:
    """The session's turns, oldest first (404 when unknown or expired)."""
    try:
        turns = await services.sessions.load(session_id)
    except SessionStoreUnavailable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc)) from None
    if turns is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"unknown or expired session {session_id!r}")
    return {"session_id": session_id, "turns": turns}


@router.delete("/sessions/{session_id}")
async def delete_session(session_id: SessionId, services: ServicesDep) -> dict[str, Any]:
    """Forget the session: a follow-up with this ``session_id`` then gets 404 ``unknown_session``."""
    try:
        deleted = await services.sessions.delete(session_id)
    except SessionStoreUnavailable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc)) from None
    if not deleted:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"unknown or expired session {session_id!r}")
    return {"session_id": session_id, "deleted": True}
