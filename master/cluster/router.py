"""Tool calls between masters over Redis streams: one inbox stream per master.

A master that calls an agent of another master adds ``{kind: "call", ...}`` to that master's
inbox ``cluster:inbox:{master_id}``; the owner runs the call on its WebSocket agent and adds
``{kind: "result", ...}`` to the caller's inbox. Each master reads only its own inbox, with
``XREAD BLOCK`` of one second on a connection whose read timeout is longer, from the last id it
saw: entries added while it was disconnected from Redis wait for it (plain pub/sub would drop
them), and a quiet inbox never trips a read timeout (no reconnect storms).

A call whose owner's lease expires (the master was killed) fails within a heartbeat or two
(``AgentDisconnected``), not after ``TOOL_CALL_TIMEOUT``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, cast

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.agents.dispatch import Dispatcher
from master.agents.registry import Registry
from master.cluster.directory import ClusterDirectory
from master.cluster.remote import RemoteAgent
from master.errors import (
    AgentDisconnected,
    AgentUnavailable,
    SessionStoreUnavailable,
    ToolCallError,
    ToolFailed,
    ToolTimeout,
)
from master.redis_keys import master_inbox_key, master_lease_key
from protocol import ToolProgress, ToolResult

logger = logging.getLogger("master.cluster.router")

BLOCK_MS = 1000
INBOX_MAXLEN = 10_000

_ERRORS: dict[str, type[ToolCallError]] = {
    "timeout": ToolTimeout,
    "unavailable": AgentUnavailable,
    "disconnected": AgentDisconnected,
    "failed": ToolFailed,
}


def _kind(exc: ToolCallError) -> str:
    for kind, cls in _ERRORS.items():
        if isinstance(exc, cls):
            return kind
    return "failed"


class ClusterRouter:
    """Sends calls to other masters, serves theirs, and matches results to waiting calls."""

    def __init__(
        self, redis: aioredis.Redis, directory: ClusterDirectory, dispatcher: Dispatcher, registry: Registry
    ) -> None:
        self._redis = redis
        self._directory = directory
        self._dispatcher = dispatcher
        self._registry = registry
        self._inbox = master_inbox_key(directory.master_id)
        self._waiting: dict[str, RemoteAgent] = {}
        self._serving: set[asyncio.Task[None]] = set()
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._dispatcher.remote_sender = self.send_call
        self._dispatcher.remote_done = self._forget
        self._directory.on_tick.append(self._check_owners)
        try:  # a restart under the same OPENAGENT_MASTER_ID must not replay its previous life's calls
            await self._redis.delete(self._inbox)
        except RedisError as exc:
            logger.warning("could not empty the cluster inbox: %s", exc)
        self._reader = asyncio.create_task(self._read_forever(), name="cluster-inbox")

    async def aclose(self) -> None:
        tasks = [t for t in (self._reader, *self._serving) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ caller side

    async def send_call(
        self,
        agent: RemoteAgent,
        call_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        wait_seconds: float,
        traceparent: str | None,
    ) -> None:
        """Hand the call to the master holding ``agent``; its result comes back through our inbox."""
        if not self._directory.alive(agent.master_id):
            raise AgentUnavailable(
                f"agent {agent.agent_id!r} is on master {agent.master_id!r}, which is gone"
            )
        self._waiting[call_id] = agent
        message = {
            "kind": "call",
            "call_id": call_id,
            "origin": self._directory.master_id,
            "agent_id": agent.agent_id,
            "tool_name": tool_name,
            "arguments": arguments,
            "timeout": wait_seconds,
            "traceparent": traceparent,
        }
        await self._post(agent.master_id, message)

    async def forward_callback(self, kind: str, call_id: str, token: str, body: dict[str, Any]) -> bool:
        """A callback (``kind`` ``callback`` or ``progress``) of a call this master does not hold:
        hand it to the master that made the call (its record's ``master``); False when no live
        master did."""
        records = self._dispatcher.records
        holder = await records.holder(call_id) if records is not None else None
        return holder is not None and await self.forward_to(holder, kind, call_id, token, body)

    async def forward_to(
        self, holder: str, kind: str, call_id: str, token: str, body: dict[str, Any]
    ) -> bool:
        """Hand a callback to master ``holder`` through its inbox; False when it is this master, its
        lease expired (it is gone: the caller records the result instead) or Redis fails."""
        if holder == self._directory.master_id:
            return False
        try:
            if not await self._redis.exists(master_lease_key(holder)):
                return False
        except RedisError:
            return False
        try:
            await self._post(holder, {"kind": kind, "call_id": call_id, "token": token, **body})
        except AgentUnavailable:
            return False
        return True

    def _forget(self, call_id: str) -> None:
        self._waiting.pop(call_id, None)

    def _check_owners(self) -> None:
        """Fail at once the calls whose owner's lease expired."""
        for call_id, agent in list(self._waiting.items()):
            if not self._directory.alive(agent.master_id):
                self._waiting.pop(call_id, None)
                self._dispatcher.settle_remote(
                    call_id,
                    error=AgentDisconnected(
                        f"master {agent.master_id!r} holding agent {agent.agent_id!r} stopped answering"
                        " (its lease expired) while the call was in flight"
                    ),
                )

    # ------------------------------------------------------------------ inbox

    async def _post(self, master_id: str, message: dict[str, Any]) -> None:
        try:
            await self._redis.xadd(
                master_inbox_key(master_id),
                {"m": json.dumps(message, separators=(",", ":"), default=str)},
                maxlen=INBOX_MAXLEN,
                approximate=True,
            )
        except RedisError as exc:
            raise AgentUnavailable(f"cannot reach master {master_id!r} through Redis: {exc}") from exc

    async def _read_forever(self) -> None:
        last = "0"
        while True:
            try:
                batches = cast(
                    list[tuple[str, list[tuple[str, dict[str, str]]]]],
                    await self._redis.xread({self._inbox: last}, count=100, block=BLOCK_MS),
                )
            except RedisError as exc:
                logger.warning("reading the cluster inbox failed (%s); retrying", exc)
                await asyncio.sleep(0.5)
                continue
            for _, entries in batches or ():
                for entry_id, fields in entries:
                    last = entry_id
                    try:
                        self._handle(json.loads(fields["m"]))
                    except (ValueError, KeyError, TypeError) as exc:
                        logger.warning("skipping a bad cluster message %s: %s", entry_id, exc)

    def _handle(self, message: dict[str, Any]) -> None:
        kind = message.get("kind")
        if kind == "call":
            task = asyncio.create_task(self._serve(message), name=f"cluster-call-{message['call_id']}")
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)
        elif kind == "callback":
            result = ToolResult(
                call_id=str(message["call_id"]),
                success=bool(message.get("success")),
                result=message.get("result"),
                error=message.get("error"),
            )
            token = str(message["token"])
            outcome = self._dispatcher.resolve_callback(token, result)
            if outcome == "unknown" and self._dispatcher.records is not None:
                # Not in this master's memory (it restarted under the same OPENAGENT_MASTER_ID):
                # record the result in the session, as a master finding the holder gone would.
                task = asyncio.create_task(
                    self._record_orphan(token, result), name=f"cluster-orphan-{result.call_id}"
                )
                self._serving.add(task)
                task.add_done_callback(self._serving.discard)
            elif outcome != "accepted":
                logger.info("forwarded callback of call %s: %s", result.call_id, outcome)
        elif kind == "remote_progress":
            self._dispatcher.progress_remote(
                ToolProgress(
                    call_id=str(message["call_id"]),
                    message=str(message.get("message") or ""),
                    progress=message.get("progress"),
                )
            )
        elif kind == "progress":
            progress = ToolProgress(
                call_id=str(message["call_id"]),
                message=message.get("message"),
                progress=message.get("progress"),
            )
            self._dispatcher.progress_callback(str(message["token"]), progress)
        elif kind == "result":
            call_id = str(message["call_id"])
            self._waiting.pop(call_id, None)
            if message.get("success"):
                self._dispatcher.settle_remote(call_id, result=message.get("result"))
            else:
                error = _ERRORS.get(str(message.get("error_kind")), ToolFailed)(str(message.get("error")))
                self._dispatcher.settle_remote(call_id, error=error)

    async def _record_orphan(self, token: str, result: ToolResult) -> None:
        records = self._dispatcher.records
        if records is None:
            return
        try:
            delivery = await records.deliver(token, result)
        except SessionStoreUnavailable as exc:
            logger.warning("forwarded callback of call %s could not be recorded: %s", result.call_id, exc)
            return
        logger.info("forwarded callback of call %s: %s", result.call_id, delivery.status)

    async def _serve(self, message: dict[str, Any]) -> None:
        """Run another master's call on our agent and send the outcome back."""
        reply: dict[str, Any] = {"kind": "result", "call_id": message["call_id"]}
        agent = self._registry.get(str(message["agent_id"]))
        origin = str(message["origin"])
        forwarded: list[asyncio.Task[None]] = []

        def forward_progress(progress: ToolProgress) -> None:
            update = {
                "kind": "remote_progress",
                "call_id": message["call_id"],
                "message": progress.message,
                "progress": progress.progress,
            }
            forwarded.append(asyncio.create_task(self._post_quietly(origin, update)))

        try:
            if agent is None:
                raise AgentUnavailable(
                    f"agent {message['agent_id']!r} is not connected to master {self._directory.master_id!r}"
                )
            reply["result"] = await self._dispatcher.call(
                agent,
                str(message["tool_name"]),
                dict(message.get("arguments") or {}),
                wait_seconds=float(message["timeout"]),
                on_progress=forward_progress,
            )
            reply["success"] = True
        except ToolCallError as exc:
            reply.update(success=False, error=str(exc), error_kind=_kind(exc))
        await asyncio.gather(*forwarded)  # the caller sees the progress before the result
        await self._post_quietly(origin, reply)

    async def _post_quietly(self, master_id: str, message: dict[str, Any]) -> None:
        try:
            await self._post(master_id, message)
        except AgentUnavailable as exc:
            logger.warning("could not send %s of call %s: %s", message["kind"], message["call_id"], exc)
