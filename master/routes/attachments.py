"""``GET /attachments/{ref}`` (the RAG agents' blob endpoint) and ``GET /query/session-rag-context``."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Header, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict

from master.access import Permission
from master.agents.toolbox import Toolbox
from master.attachments.rag import rag_agents
from master.deps import ScopeDep, ServicesDep, needs
from master.errors import AttachmentAccessDenied, AttachmentNotFound, SessionStoreUnavailable
from master.errors.responses import ApiError
from master.openapi import error
from protocol import ErrorCode
from protocol.rag import CALL_TOKEN_HEADER, FILENAME_HEADER

blobs = APIRouter(tags=["attachments"], dependencies=needs(Permission.CALL_TOKEN))
"""Authenticated by the per-query call token, not the API key (like ``/tool_callback``)."""
router = APIRouter(tags=["query"], dependencies=needs(Permission.QUERY))


class SessionAttachment(BaseModel):
    """One file of a session, and its indexing state."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    ref: str
    """The ref RAG agents fetch it by (``GET /attachments/{ref}``)."""
    filename: str
    mime_type: str
    size: int
    sha256: str
    attached_at: float
    index: dict[str, Any] | None
    """The indexer's state for this file (``null`` before it reports one)."""


class RagAgents(BaseModel):
    """The connected RAG agents' ids (``null`` when none is connected)."""

    extractor: str | None
    indexer: str | None


class SessionRagContext(BaseModel):
    """``GET /query/session-rag-context``."""

    session_id: str
    attachments: list[SessionAttachment]
    rag_agents: RagAgents


@blobs.get(
    "/attachments/{ref}",
    response_class=Response,
    responses={
        200: {
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            "description": "The file's bytes (with its own media type)",
        },
        401: error("Missing, wrong or expired call token (unauthorized)"),
        404: error("No such attachment in the token's session (unknown_attachment)"),
        503: error("Redis unavailable (session_store_unavailable)"),
    },
)
async def get_attachment(
    ref: str,
    services: ServicesDep,
    token: Annotated[str, Header(alias=CALL_TOKEN_HEADER)] = "",
) -> Response:
    """One attachment of the session the call token was issued for (RAG agents only)."""
    store = services.attachments
    if store is None:
        raise ApiError(ErrorCode.NOT_FOUND, "attachments are not enabled on this master")
    try:
        item, data = await store.blob(token, ref)
    except AttachmentAccessDenied as exc:
        raise ApiError(ErrorCode.UNAUTHORIZED, str(exc)) from None
    except AttachmentNotFound as exc:
        raise ApiError(ErrorCode.UNKNOWN_ATTACHMENT, str(exc)) from None
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    # A download, never a page: an HTML or SVG attachment must not run in the master's origin.
    return Response(
        data,
        media_type=item.mime_type,
        headers={
            FILENAME_HEADER: quote(item.filename),
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(item.filename)}",
        },
    )


@router.get(
    "/query/session-rag-context",
    response_model=SessionRagContext,
    responses={
        404: error("Unknown or expired session (unknown_session)"),
        503: error("Redis unavailable (session_store_unavailable)"),
    },
)
async def session_rag_context(
    services: ServicesDep,
    scope: ScopeDep,
    session_id: Annotated[str, Query(pattern=r"^[A-Za-z0-9_-]{1,128}$")],
) -> dict[str, Any]:
    """The session's attachments (ref, filename, size) and their indexing state per file.

    The vectors themselves stay with the indexer (``search_knowledge``). Another tenant's
    session is unknown (404).
    """
    store = services.attachments
    try:
        if not await services.sessions.visible(session_id, scope):
            raise ApiError(ErrorCode.UNKNOWN_SESSION, f"unknown or expired session {session_id!r}")
        files = await store.files(session_id, scope) if store is not None else []
        states = await store.index_states(session_id, scope) if store is not None else {}
        known = bool(files) or await services.sessions.load(session_id, scope) is not None
    except SessionStoreUnavailable as exc:
        raise ApiError(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None
    if not known:
        raise ApiError(ErrorCode.UNKNOWN_SESSION, f"unknown or expired session {session_id!r}")
    extractor, indexer = rag_agents(Toolbox(services.queries.tool_agents(None, scope)))
    return {
        "session_id": session_id,
        "attachments": [{**item.as_dict(), "index": states.get(item.ref)} for item in files],
        "rag_agents": {"extractor": extractor, "indexer": indexer},
    }
