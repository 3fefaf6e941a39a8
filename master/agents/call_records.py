"""Durable HTTP invocation calls: a record in Redis per call, so that its callback is never lost.

Before the master POSTs a call to an invocation agent it writes ``call:{call_id}`` (a HASH,
see :func:`master.storage.redis_keys.call_record_key`): the SHA-256 of the call's token, the session and
query it belongs to, the agent, tool and arguments, and the master holding it (state
``pending``; TTL the call's timeout plus :data:`RECORD_MARGIN_SECONDS`). The record ends in one
of two ways, each in one Lua script, so that a result reaches the session **at most once per
accepted call**:

- the query stores its turns (:meth:`master.conversation.store.SessionStore.append`), and the
  same script marks the records of the calls those turns carry ``stored``;
- or the query is gone (its master was killed or restarted, or stopped before storing), and a
  master receiving the callback *claims* the record (:data:`_CLAIM`): it checks the token hash
  and the state, appends the result to the session as a ``call_tool`` turn with
  ``late_callback: true``, and marks the record ``recorded``. A result over
  ``OPENAGENT_MAX_TOOL_RESULT_BYTES`` is recorded as the error a waiting query would have seen
  (:func:`result_too_large`), never whole.

A second delivery of the same callback then finds ``recorded`` or ``stored`` and is refused
(409 or 410); a wrong token changes nothing. After the record expires, a callback is unknown
(404), as it always was. See docs/scale-out.md, "Durable invocation calls".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.errors import SessionStoreUnavailable
from master.observability import logs
from master.storage.json_bytes import dump_json
from master.storage.redis_client import GroupCommit
from master.storage.redis_keys import call_record_key, session_key
from protocol import ToolResult

logger = logging.getLogger("master.agents.call_records")

RECORD_MARGIN_SECONDS = 60
"""A record outlives its call's timeout by this much: the time a late callback still has to be recorded."""

# HSET the fields and set the TTL: one command on the wire, which carries the values only.
_WRITE = """
redis.call('HSET', KEYS[1], 'state', 'pending', 'token', ARGV[2], 'master', ARGV[3], 'session', ARGV[4],
  'query', ARGV[5], 'agent', ARGV[6], 'tool', ARGV[7], 'args', ARGV[8])
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
"""

# Claim a pending record whose token hash matches, append the turn to the session (the same
# splice as the session store's append), and mark the record recorded: all or nothing, once.
# Returns the record's state before the claim ('pending' when this call claimed it), or 'unknown'.
_CLAIM = """
local state = redis.call('HGET', KEYS[1], 'state')
if not state or redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 'unknown' end
if state ~= 'pending' then return state end
if ARGV[2] ~= '' then
  local n = redis.call('STRLEN', KEYS[2])
  if n <= 2 then
    redis.call('SET', KEYS[2], '[' .. ARGV[2] .. ']', 'EX', ARGV[3])
  else
    redis.call('SETRANGE', KEYS[2], n - 1, ',' .. ARGV[2] .. ']')
    redis.call('EXPIRE', KEYS[2], ARGV[3])
  end
end
redis.call('HSET', KEYS[1], 'state', 'recorded')
return 'pending'
"""

DeliveryStatus = Literal[
    "recorded", "forwarded", "already_recorded", "finished", "no_session", "unknown", "unanswered"
]

Forward = Callable[[str], Awaitable[DeliveryStatus | None]]
"""Hands the callback to master ``holder`` while its lease lives and returns what became of it
there; ``None`` when the holder is gone (cluster mode, :meth:`master.cluster.router.ClusterRouter.forward_result`)."""


@dataclass(frozen=True)
class Delivery:
    """What became of a callback that no call in this master's memory was waiting for."""

    status: DeliveryStatus
    session_id: str | None = None


DEFAULT_MAX_RESULT_BYTES = 1024 * 1024
"""``OPENAGENT_MAX_TOOL_RESULT_BYTES``' default."""


def result_too_large(agent_id: str, tool_name: str, call_id: str, result: Any, limit: int) -> str | None:
    """The error of a tool result larger than ``limit`` bytes as JSON (``None``: within it). The
    one size check of every result an agent sends: a waiting call fails with it
    (:meth:`master.agents.dispatch.Dispatcher._deliver`), a late callback records it
    (:meth:`CallRecords.deliver`); the result is dropped, never stored."""
    size = len(dump_json(result))
    if size <= limit:
        return None
    logger.warning(
        "result of %s.%s call=%s dropped: %d bytes, over OPENAGENT_MAX_TOOL_RESULT_BYTES (%d)",
        agent_id,
        tool_name,
        call_id,
        size,
        limit,
    )
    return (
        f"tool {tool_name!r} on agent {agent_id!r} failed: its result is {size} bytes, over the limit "
        f"of {limit} bytes (OPENAGENT_MAX_TOOL_RESULT_BYTES); the result was dropped"
    )


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class CallRecords:
    """Writes the record of each HTTP invocation call, and claims it for a callback whose query is gone."""

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        master_id: str,
        session_ttl_seconds: int,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        self._redis = redis
        self.max_result_bytes = max_result_bytes
        """A late result larger than this is recorded as an error (:func:`result_too_large`)."""
        self.master_id = master_id
        self._session_ttl = session_ttl_seconds
        self._write = redis.register_script(_WRITE)
        self._writes = GroupCommit(redis)
        """Concurrent calls' records go out as one pipeline (each call still waits for its own answer)."""
        self._claim = redis.register_script(_CLAIM)

    async def record(
        self, call_id: str, token: str, agent_id: str, tool_name: str, arguments: Any, call_timeout: float
    ) -> None:
        """Write the call's record (one round trip), with the session and query of the running query
        (:mod:`master.observability.logs` context). A Redis failure is logged: the call goes on,
        only without surviving a restart of this master."""
        values = (  # _WRITE's ARGV: the TTL, then the fields token, master, session, query, agent, tool, args
            int(call_timeout) + RECORD_MARGIN_SECONDS,
            token_hash(token),
            self.master_id,
            logs.session_id_var.get() or "",
            logs.query_id_var.get() or "",
            agent_id,
            tool_name,
            json.dumps(arguments, separators=(",", ":"), default=str),
        )
        try:
            await self._writes.run(self._write, [call_record_key(call_id)], values)
        except RedisError as exc:
            logger.warning(
                "could not record call %s in Redis (it will not survive a restart): %s", call_id, exc
            )

    async def holder(self, call_id: str) -> str | None:
        """The master that made the call, while its record lives (``None`` on a Redis failure too)."""
        try:
            master = await self._redis.hget(call_record_key(call_id), "master")
        except RedisError:
            return None
        return str(master) if master else None

    async def deliver(self, token: str, result: ToolResult, forward: Forward | None = None) -> Delivery:
        """A callback for a call no query of this master waits for (it restarted, or another master
        made the call): forward it to the holder while that master lives (``forward``, cluster mode),
        else record the result in the call's session, once.

        Raises :class:`SessionStoreUnavailable` when Redis does not answer (the agent should retry).
        """
        key = call_record_key(result.call_id)
        digest = token_hash(token)
        try:
            record = cast(dict[str, str], await self._redis.hgetall(key))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"call store unavailable (Redis): {exc}") from exc
        if not record or not hmac.compare_digest(record.get("token", ""), digest):
            return Delivery("unknown")
        session_id = record.get("session") or None
        state = record.get("state")
        if state == "recorded":
            return Delivery("already_recorded", session_id)
        if state != "pending":
            return Delivery("finished", session_id)
        holder = record.get("master", "")
        if forward is not None and holder and holder != self.master_id:
            forwarded = await forward(holder)
            if forwarded is not None:
                return Delivery(forwarded, session_id)
        turn = _late_turn(record, result, self.max_result_bytes) if session_id else None
        payload = json.dumps(turn, separators=(",", ":"), default=str) if turn else ""
        try:
            before = await self._claim(
                keys=[key, session_key(session_id or "-")], args=[digest, payload, self._session_ttl]
            )
        except RedisError as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        if before == "pending":
            logger.info(
                "call %s (%s.%s) of master %s: its query is gone; result recorded in session %s",
                result.call_id,
                record.get("agent"),
                record.get("tool"),
                holder,
                session_id,
                extra={"call_id": result.call_id, "session_id": session_id, "query_id": record.get("query")},
            )
            return Delivery("recorded" if session_id else "no_session", session_id)
        if before == "recorded":
            return Delivery("already_recorded", session_id)
        return Delivery("unknown" if before == "unknown" else "finished", session_id)


def _late_turn(record: dict[str, str], result: ToolResult, max_result_bytes: int) -> dict[str, Any]:
    try:
        arguments = json.loads(record.get("args") or "null")
    except ValueError:
        arguments = None
    turn: dict[str, Any] = {
        "query_id": record.get("query") or None,
        "decision": "call_tool",
        "tool_agent_id": record.get("agent"),
        "tool_name": record.get("tool"),
        "tool_args": arguments,
    }
    too_large = (
        result_too_large(
            str(record.get("agent")), str(record.get("tool")), result.call_id, result.result, max_result_bytes
        )
        if result.success
        else None
    )
    if too_large is not None:
        turn["error"] = too_large
    elif result.success:
        turn["result"] = result.result
    else:
        turn["error"] = result.error or "no error message given"
    turn |= {"call_id": result.call_id, "late_callback": True, "ts": time.time()}
    return turn
