"""``GET /attachments/{ref}`` (the RAG agents' blob endpoint) and ``GET /query/session-rag-context``."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, HTTPException, Query, status
from fastapi.responses import Response

from master.agents.toolbox import Toolbox
from master.attachments.rag import rag_agents
from master.deps import ServicesDep, require_api_key
from master.errors import AttachmentAccessDenied, AttachmentNotFound, SessionStoreUnavailable
from protocol.rag import CALL_TOKEN_HEADER, FILENAME_HEADER

blobs = APIRouter(tags=["attachments"])
"""Authenticated by the per-query call token, not the API key (like ``/tool_callback``)."""
router = APIRouter(tags=["query"], dependencies=[Depends(require_api_key)])


@blobs.get(
    "/attachments/{ref}",
    responses={
        200: {"content": {"application/octet-stream": {}}, "description": "The file's bytes"},
        401: {"description": "Missing, wrong or expired call token"},
        404: {"description": "No such attachment in the token's session"},
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
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail="attachments are not enabled on this master")
    try:
        item, data = await store.blob(token, ref)
    except AttachmentAccessDenied as exc:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, detail=str(exc)) from None
    except AttachmentNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=str(exc)) from None
    except SessionStoreUnavailable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc)) from None
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


@router.get("/query/session-rag-context")
async def session_rag_context(
    services: ServicesDep, session_id: Annotated[str, Query(pattern=r"^[A-Za-z0-9_-]{1,128}$")]
) -> dict[str, Any]:
    """The session's attachments (ref, filename, size) and their indexing state per file.

    The vectors themselves stay with the indexer (``search_knowledge``).
    """
    store = services.attachments
    try:
        files = await store.files(session_id) if store is not None else []
        states = await store.index_states(session_id) if store is not None else {}
        known = bool(files) or await services.sessions.load(session_id) is not None
    except SessionStoreUnavailable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=str(exc)) from None
    if not known:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=f"unknown or expired session {session_id!r}")
    extractor, indexer = rag_agents(Toolbox(services.queries.tool_agents(None)))
    return {
        "session_id": session_id,
        "attachments": [{**item.as_dict(), "index": states.get(item.ref)} for item in files],
        "rag_agents": {"extractor": extractor, "indexer": indexer},
    }
