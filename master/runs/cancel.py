"""Cancelling a run: the one verb every door's cancel comes to (:class:`RunCanceller`).

``DELETE /runs/{run_id}``, ``POST /v1/responses/{id}/cancel``, A2A ``CancelTask``, an MCP
``notifications/cancelled`` of an ``ask`` call and a WebSocket ``cancel`` frame all call
:meth:`master.query.entry.QueryEntry.cancel`, which calls :meth:`RunCanceller.cancel` here. What
it does depends on the run's record (:mod:`master.runs.store`), read in the asker's
:class:`~master.auth.Scope` (fail closed: another tenant's run does not exist for it):

- **unknown** (never started, expired, or another tenant's): :class:`CancelRefused`
  ``unknown_run`` (404);
- **running**, on whichever master holds it: its id goes out on
  :data:`~master.storage.redis_keys.RUNS_CANCEL_CHANNEL`; the holder cancels the run's task, which ends
  ``cancelled`` (its calls in flight ``unknown``, never sent again), and the run's asker gets
  ``run_cancelled``. The answer is the record once the holder wrote that end (or, after
  ``wait_seconds`` without it, as it stands: still ``running``);
- **paused** (``awaiting_approval``, ``awaiting_tool_results``, ``stopped`` by a budget or the step
  limit): no master runs it, so it is cancelled in the store, atomically (a resume that takes it
  at the same moment either wins, and the run is then running and cancelled as such, or loses):
  the record says ``cancelled``, what it would resume from is dropped (its checkpoint, the
  session's paused state) and its pending approvals are withdrawn (decided ``rejected`` with a
  message saying the run was cancelled). It can no longer be resumed;
- **cancelled** already: the record, unchanged (idempotent: a second cancel is no error);
- **finished** (``completed``, ``failed``): :class:`CancelRefused` ``run_not_running`` (409),
  naming the state. Nothing is changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.auth import Scope
from master.conversation.approvals import ApprovalStore
from master.conversation.store import SessionStore
from master.errors import SessionStoreUnavailable
from master.runs.state import RunState
from master.runs.store import RunStore
from master.storage.redis_keys import RUNS_CANCEL_CHANNEL, RUNS_RUNNING_KEY, run_checkpoint_key, run_key
from protocol import ErrorCode

logger = logging.getLogger("master.runs.cancel")

PAUSED: tuple[str, ...] = ("awaiting_approval", "awaiting_tool_results", "stopped")
"""States of a run no master runs that a resume could take again: a cancel ends them in the store."""
FINISHED: tuple[str, ...] = ("completed", "failed")
"""States a cancel refuses (``run_not_running``): the run ended on its own."""
WITHDRAWN = "withdrawn: the run was cancelled"
"""The message of an approval withdrawn because its run was cancelled."""
CANCEL_WAIT_SECONDS = 10.0
"""How long a cancel waits for the master holding a running run to stop it."""

# Cancels a paused run: of a cancel and a resume, one wins. KEYS: run, running set, checkpoint;
# ARGV: reason, now, run id, states... Returns {1, the state it was in} or {0, its state}.
_CANCEL_PAUSED = """
local raw = redis.call('GET', KEYS[1])
if not raw then return {0, ''} end
local run = cjson.decode(raw)
for i = 4, #ARGV do
  if run.state == ARGV[i] then
    local was = run.state
    run.state, run.reason, run.updated_at = 'cancelled', ARGV[1], tonumber(ARGV[2])
    redis.call('SET', KEYS[1], cjson.encode(run), 'KEEPTTL')
    redis.call('SREM', KEYS[2], ARGV[3])
    redis.call('DEL', KEYS[3])
    return {1, was}
  end
end
return {0, run.state}
"""


class CancelRefused(Exception):
    """The run is not cancelled: ``unknown_run`` (404) or ``run_not_running`` (409), or the store
    is down (``session_store_unavailable``, 503). The message names the run (and its state)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class RunCanceller:
    """Cancels runs from any master (see the module docstring)."""

    def __init__(
        self,
        runs: RunStore,
        redis: aioredis.Redis,
        *,
        sessions: SessionStore | None = None,
        approvals: ApprovalStore | None = None,
        wait_seconds: float = CANCEL_WAIT_SECONDS,
        timeout_seconds: float = 5.0,
    ) -> None:
        self._runs = runs
        self._sessions = sessions
        self._approvals = approvals
        self.wait_seconds = wait_seconds
        self._timeout = timeout_seconds
        self._redis = redis
        self._cancel_paused = redis.register_script(_CANCEL_PAUSED)

    async def cancel(self, run_id: str, scope: Scope, *, door: str = "http") -> dict[str, Any]:
        """Cancel ``run_id`` for ``scope`` (``door``: whose cancel, in the run's ``reason``);
        returns the run's record as it stands after. Raises :class:`CancelRefused`."""
        try:
            return await self._cancel(run_id, scope, door)
        except SessionStoreUnavailable as exc:
            raise CancelRefused(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc)) from None

    async def _cancel(self, run_id: str, scope: Scope, door: str) -> dict[str, Any]:
        for _ in range(3):  # a paused run a resume took meanwhile is running: once more
            record = await self._runs.get(run_id, scope)
            if record is None:
                raise CancelRefused(ErrorCode.UNKNOWN_RUN, f"no run {run_id!r} (never started, or expired)")
            state = record["state"]
            if state == "cancelled":
                return record
            if state in FINISHED:
                raise CancelRefused(ErrorCode.RUN_NOT_RUNNING, _finished(run_id, state))
            if state == "running":
                now = await self._runs.cancel(run_id, scope, wait_seconds=self.wait_seconds)
                if now is None:
                    raise CancelRefused(
                        ErrorCode.UNKNOWN_RUN, f"no run {run_id!r} (never started, or expired)"
                    )
                if now["state"] in FINISHED:  # it ended on its own before the cancel reached it
                    raise CancelRefused(ErrorCode.RUN_NOT_RUNNING, _finished(run_id, now["state"]))
                if now["state"] in PAUSED:  # it paused before the cancel reached it: once more
                    continue
                return now
            if await self._end_paused(run_id, record, door):
                now = await self._runs.get(run_id, scope)
                return now if now is not None else {**record, "state": "cancelled"}
        raise CancelRefused(
            ErrorCode.RUN_NOT_RUNNING, f"run {run_id!r} kept changing state while being cancelled; try again"
        )

    async def _end_paused(self, run_id: str, record: dict[str, Any], door: str) -> bool:
        """Cancel a paused run in the store; ``False`` when it left its paused state meanwhile."""
        reason = f"cancelled while {record['state']} ({_door(door)})"
        try:
            async with asyncio.timeout(self._timeout):
                won, _ = await self._cancel_paused(
                    keys=[run_key(run_id), RUNS_RUNNING_KEY, run_checkpoint_key(run_id)],
                    args=[reason, time.time(), run_id, *PAUSED],
                )
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        if not won:
            return False
        if record["state"] != "stopped":  # a stopped run keeps nothing in its session
            await self._forget_paused(run_id, record.get("session_id"))
        return True

    async def _forget_paused(self, run_id: str, session_id: str | None) -> None:
        """Drop the session's paused state of the run (nothing resumes it) and withdraw its pending
        approvals. The run's record says ``cancelled`` already: a failure here is logged."""
        if not session_id or self._sessions is None:
            return
        try:
            state = await self._sessions.paused(session_id)
            if state is None or str(state.get("run_id") or "") != run_id:
                await self._stop_resumed(run_id)
                return  # another run of the session paused since, or nothing kept
            taken = await self._sessions.take_paused(session_id)
            if taken is None:
                await self._stop_resumed(run_id)
                return
            if self._approvals is None:
                return
            held = RunState.model_validate(taken).held  # the held calls sit in its pending item
            for call in held.held if held is not None else ():
                await self._approvals.decide(call.approval_id, "rejected", message=WITHDRAWN)
        except SessionStoreUnavailable as exc:
            logger.warning("run %s cancelled; its paused state was not cleared: %s", run_id, exc)

    async def _stop_resumed(self, run_id: str) -> None:
        """A resume took the paused run just before its cancel: whichever master holds it now
        cancels it (:data:`~master.storage.redis_keys.RUNS_CANCEL_CHANNEL`), if it accepted it already."""
        try:
            async with asyncio.timeout(self._timeout):
                await self._redis.publish(RUNS_CANCEL_CHANNEL, run_id)
        except (RedisError, TimeoutError) as exc:
            logger.warning("run %s cancelled while resuming; the cancel was not sent: %s", run_id, exc)


def _finished(run_id: str, state: str) -> str:
    return f"run {run_id!r} is {state}: only a running or paused run is cancelled"


def _door(door: str) -> str:
    return {
        "http": "DELETE /runs/{run_id}",
        "responses": "POST /v1/responses/{id}/cancel",
        "a2a": "A2A CancelTask",
        "mcp": "MCP notifications/cancelled",
        "websocket": "a WebSocket cancel frame",
    }.get(door, door)
