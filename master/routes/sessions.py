"""``GET /sessions/{session_id}`` and ``DELETE /sessions/{session_id}``: read or forget a conversation.

The web UI reads a session's turns to show a transcript, and deletes the server-side
session when the user starts a new one. Both need the API key (the router is included
with it). Another tenant's session is unknown (404) to a key that is not an administrator's.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict

from master.deps import ScopeDep, ServicesDep
from master.errors import SessionStoreUnavailable
from master.errors.responses import ApiError
from master.openapi import error
from protocol import ErrorCode

router = APIRouter(tags=["sessions"])

SessionId = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9_-]{1,128}$", description="A session_id from POST /query")
]
_ERRORS: dict[int | str, dict[str, Any]] = {
    404: error("Unknown or expired session (unknown_session)"),
    503: error("Redis unavailable (session_store_unavailable)"),
}


class SessionTurns(BaseModel):
    """``GET /sessions/{session_id}``: the session's turns, oldest first."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    session_id: str
    turns: list[dict[str, Any]]
    """Each turn as stored (the question, the answer, the tools called, summaries), with its time."""


class SessionDeleted(BaseModel):
    """``DELETE /sessions/{session_id}``."""

    session_id: str
    deleted: bool


@router.get("/sessions/{session_id}", response_model=SessionTurns, responses=_ERRORS)
async def read_session(session_id: SessionId, services: ServicesDep, scope: ScopeDep) -> dict[str, Any]:
    """The session's turns, oldest first (404 when unknown or expired, or another tenant's)."""
    try:
        turns = await services.sessions.load(session_id, scope)
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    if turns is None:
        raise ApiError(ErrorCode.UNKNOWN_SESSION, f"unknown or expired session {session_id!r}")
    return {"session_id": session_id, "turns": turns}


@router.delete("/sessions/{session_id}", response_model=SessionDeleted, responses=_ERRORS)
async def delete_session(session_id: SessionId, services: ServicesDep, scope: ScopeDep) -> dict[str, Any]:
    """Forget the session: a follow-up with this ``session_id`` then gets 404 ``unknown_session``."""
    try:
        deleted = await services.sessions.delete(session_id, scope)
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    if not deleted:
        raise ApiError(ErrorCode.UNKNOWN_SESSION, f"unknown or expired session {session_id!r}")
    return {"session_id": session_id, "deleted": True}
