"""One WebSocket connection of the hub (:class:`Connection`: serialized sends, its errors, the
agent it registered, its queries in flight), and how a frame that fails to parse is answered
(:func:`describe_invalid`, :func:`ref_of`)."""

from __future__ import annotations

import asyncio

from pydantic import ValidationError
from pydantic_core import from_json
from starlette.datastructures import QueryParams
from starlette.websockets import WebSocket, WebSocketDisconnect

from master.agents.identity import Claim
from master.agents.registry import LiveAgent
from master.auth import Principal
from master.query.entry import QueryRun
from master.storage.json_bytes import MAX_JSON_DEPTH
from protocol import ErrorMessage

__all__ = ["Connection", "describe_invalid", "ref_of"]


class Connection:
    """One accepted WebSocket, with serialized sends."""

    def __init__(self, websocket: WebSocket, principal: Principal) -> None:
        self.websocket = websocket
        self.principal = principal
        self.agent: LiveAgent | None = None
        self.claim: Claim | None = None
        self.queries_in_flight = 0
        self.queries: dict[str, QueryRun] = {}
        """Its queries in flight, by ``query_id`` (what a ``cancel`` frame names)."""
        self._send_lock = asyncio.Lock()
        self.closed = False

    @property
    def agent_tenant(self) -> str | None:
        """The tenant an agent registered over this connection serves: the key's own, or for an
        administrator's connection the one its ``?tenant=`` names (``None``: every tenant)."""
        principal = self.principal
        if principal.is_admin:
            query = QueryParams(self.websocket.scope.get("query_string", b"").decode("latin-1"))
            return query.get("tenant") or None
        return principal.tenant

    async def send(self, frame: str) -> None:
        if self.closed:
            raise ConnectionError("connection closed")
        try:
            async with self._send_lock:
                await self.websocket.send_text(frame)
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            self.closed = True
            raise ConnectionError(str(exc)) from exc

    async def send_error(self, code: str, message: str, ref: str | None = None) -> None:
        try:
            await self.send(ErrorMessage(code=code, message=message, ref=ref).model_dump_json())
        except ConnectionError:
            pass

    async def close(self, code: int, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            await self.websocket.close(code=code, reason=reason)
        except (RuntimeError, OSError):
            pass


def describe_invalid(exc: ValidationError) -> tuple[str, str]:
    """Map a parse failure to (code, message)."""
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        if "recursion limit" in str(first.get("ctx", {}).get("error", first["msg"])):
            return "invalid_message", f"frame is nested deeper than {MAX_JSON_DEPTH} levels"
        return "invalid_message", f"frame is not valid JSON: {first['msg']}"
    if first["type"] == "union_tag_invalid":
        tag = first.get("ctx", {}).get("tag")
        return "unknown_type", f"unknown message type {tag!r}"
    if first["type"] in ("union_tag_not_found", "model_attributes_type"):
        return "invalid_message", "frame must be a JSON object with a 'type' field"
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc'][1:]) or '(frame)'}: {err['msg']}" for err in exc.errors()[:5]
    )
    tag = str(first["loc"][0]) if first["loc"] else "message"
    return "invalid_message", f"invalid {tag!r} frame: {problems}"


def ref_of(raw: str) -> str | None:
    """Best-effort id of a frame that failed validation, for the error's ``ref``.

    Parsed with pydantic-core's parser, which refuses nesting deeper than
    :data:`MAX_JSON_DEPTH` with a ``ValueError``; the standard library's would raise
    ``RecursionError`` on ``'[' * 1000`` and kill the connection.
    """
    try:
        data = from_json(raw)
    except ValueError:
        return None
    if isinstance(data, dict):
        for key in ("call_id", "query_id", "agent_id"):
            if isinstance(data.get(key), str):
                return str(data[key])
    return None
