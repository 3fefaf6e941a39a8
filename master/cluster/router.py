"""Tool calls between masters over Redis streams: one inbox stream per master.

A master that calls an agent of another master adds ``{kind: "call", ...}`` to that master's
inbox ``cluster:inbox:{master_id}``; the owner runs the call on its WebSocket agent and adds
``{kind: "result", ...}`` to the caller's inbox. Each master reads only its own inbox, with
``XREAD BLOCK`` of one second on a connection whose read timeout is longer, from the last id it
saw: entries added while it was disconnected from Redis wait for it (plain pub/sub would drop
them), and a quiet inbox never trips a read timeout (no reconnect storms).

Other modules add message kinds through :attr:`ClusterRouter.handlers` (the collaborations
across masters: :mod:`master.cluster.collaboration`).

A call whose owner's lease expires (the master was killed) fails within a heartbeat or two
(``AgentDisconnected``), not after ``TOOL_CALL_TIMEOUT``. A call whose agent registers again on
another master (it reconnected elsewhere, typically because its master died) fails sooner: at
once when it re-registers on this master, else at the first heartbeat that sees the table name
the new master; its old master's connection is gone or replaced, so no result would come.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, cast, get_args

import hiredis
import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError
from redis.typing import EncodableT

from master.agents.call_records import DeliveryStatus
from master.agents.dispatch import Dispatcher
from master.agents.registry import LiveAgent, Registry
from master.agents.remote import RemoteAgent
from master.cluster.directory import ClusterDirectory
from master.errors import (
    AgentDisconnected,
    AgentUnavailable,
    SessionStoreUnavailable,
    ToolCallError,
    ToolFailed,
    ToolTimeout,
)
from master.observability import tracing
from master.storage.json_bytes import dump_json
from master.storage.redis_client import GroupCommit
from master.storage.redis_keys import master_inbox_key, master_lease_key
from protocol import ToolProgress, ToolResult

logger = logging.getLogger("master.cluster.router")

BLOCK_MS = 1000
INBOX_MAXLEN = 10_000
READ_COUNT = 256
"""Most entries one ``XREAD`` returns."""
SERVED_MEMORY = 10_000
"""Call ids remembered to run a call sent twice only once (as many as an inbox holds)."""

_ERRORS: dict[str, type[ToolCallError]] = {
    "timeout": ToolTimeout,
    "unavailable": AgentUnavailable,
    "disconnected": AgentDisconnected,
    "failed": ToolFailed,
}


_DELIVERY_STATUSES = set(get_args(DeliveryStatus))


def _message(fields: list[Any]) -> dict[str, Any]:
    """An inbox entry's message (field ``m``, a JSON object, a call's arguments inside it as
    masters of every version write and read them)."""
    values = dict(zip(fields[::2], fields[1::2], strict=True))
    message = orjson.loads(values.get("m") or values[b"m"])
    if not isinstance(message, dict):
        raise TypeError("the message is not a JSON object")
    return message


def _kind(exc: ToolCallError) -> str:
    for kind, cls in _ERRORS.items():
        if isinstance(exc, cls):
            return kind
    return "failed"


class ClusterOutbox:
    """The sending side: posts to other masters' inboxes, and hands this master's calls to the
    masters holding their agents (the dispatcher's :class:`~master.agents.dispatch.RemoteCalls`).

    Built before the dispatcher, which takes it in its constructor; the :class:`ClusterRouter`
    reading this master's inbox settles the calls it sent. Its ``XADD`` commands go out in batches
    (:class:`~master.storage.redis_client.GroupCommit`: one socket write and one read for all the messages
    posted while the previous batch was in Redis), each message encoded once by orjson, a call's
    arguments (encoded once already) spliced in as they are. The message's shape is the one older
    masters write and read (its ``arguments`` inside it), so masters of different versions can
    share a Redis during a rolling upgrade.
    """

    def __init__(self, redis: aioredis.Redis, directory: ClusterDirectory) -> None:
        self._redis = redis
        self._directory = directory
        self._writes: GroupCommit | None = None
        self.waiting: dict[str, RemoteAgent] = {}
        """Calls sent to other masters and not settled yet, by call id."""

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
        self.waiting[call_id] = agent
        message: dict[str, Any] = {
            "kind": "call",
            "call_id": call_id,
            "origin": self._directory.master_id,
            "agent_id": agent.agent_id,
            "tool_name": tool_name,
            "timeout": wait_seconds,
        }
        if traceparent is not None:
            message["traceparent"] = traceparent
        await self.post(agent.master_id, message, arguments=dump_json(arguments))

    def forget(self, call_id: str) -> None:
        self.waiting.pop(call_id, None)

    async def post(self, master_id: str, message: dict[str, Any], *, arguments: bytes | None = None) -> None:
        """Add ``message`` (with its ``kind``) to master ``master_id``'s inbox, with a call's
        ``arguments`` (JSON, spliced in as they are); raises :class:`AgentUnavailable` when Redis does not take it."""
        words: list[EncodableT] = [
            "XADD",
            master_inbox_key(master_id),
            "MAXLEN",
            "~",
            INBOX_MAXLEN,
            "*",
            "m",
            dump_json(message if arguments is None else {**message, "arguments": orjson.Fragment(arguments)}),
        ]
        if self._writes is None:  # made at the first post: the outbox is built before Redis is used
            self._writes = GroupCommit(self._redis)
        try:
            await self._writes.command(*words)
        except RedisError as exc:
            raise AgentUnavailable(f"cannot reach master {master_id!r} through Redis: {exc}") from exc


class ClusterRouter:
    """Reads this master's inbox: serves other masters' calls, settles the calls it sent through
    ``outbox``, and forwards callbacks to the masters holding their calls."""

    def __init__(
        self,
        redis: aioredis.Redis,
        directory: ClusterDirectory,
        dispatcher: Dispatcher,
        registry: Registry,
        outbox: ClusterOutbox,
    ) -> None:
        self._redis = redis
        self._directory = directory
        self._dispatcher = dispatcher
        self._registry = registry
        self._outbox = outbox
        self._inbox = master_inbox_key(directory.master_id)
        self._waiting = outbox.waiting
        self._acks: dict[str, asyncio.Future[str]] = {}
        """Callbacks this master forwarded, by call id: the holder's answer (its outcome)."""
        self._serving: set[asyncio.Task[None]] = set()
        self._served: OrderedDict[str, None] = OrderedDict()
        """The latest calls this master was sent, by id: one that comes twice is run once."""
        self._reader: asyncio.Task[None] | None = None
        self.handlers: dict[str, Callable[[dict[str, Any]], None]] = {}
        """Handlers of further message kinds, by ``kind`` (the cluster's collaborations add theirs)."""

    async def start(self) -> None:
        self._directory.on_tick.append(self._check_owners)
        self._registry.listeners.append(self._agent_changed)
        try:  # a restart under the same OPENAGENT_MASTER_ID must not replay its previous life's calls
            await self._redis.delete(self._inbox)
        except RedisError as exc:
            logger.warning("could not empty the cluster inbox: %s", exc)
        self._reader = asyncio.create_task(self._read_forever(), name="cluster-inbox")

    async def aclose(self) -> None:
        if self._agent_changed in self._registry.listeners:
            self._registry.listeners.remove(self._agent_changed)
        tasks = [t for t in (self._reader, *self._serving) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ caller side

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
        """Hand a callback or progress to master ``holder`` through its inbox; False when it is this
        master, its lease expired (it is gone) or Redis fails."""
        if holder == self._directory.master_id:
            return False
        try:
            if not await self._redis.exists(master_lease_key(holder)):
                return False
        except RedisError:
            return False
        message = {
            "kind": kind,
            "call_id": call_id,
            "token": token,
            "origin": self._directory.master_id,
            **body,
        }
        try:
            await self._outbox.post(holder, message)
        except AgentUnavailable:
            return False
        return True

    async def forward_result(
        self, holder: str, call_id: str, token: str, body: dict[str, Any]
    ) -> DeliveryStatus | None:
        """Hand a callback to ``holder`` and wait for its answer (a live master reads its inbox
        continuously): ``forwarded`` when a query had or has it, else what the holder made of it
        (``recorded``, ``finished``...); ``unanswered`` when no answer came within a lease (the holder
        may have just died: the agent retries, and once the lease has expired the result is recorded);
        ``None`` when the holder is gone, or is this master."""
        if call_id in self._acks:
            return "unanswered"  # the same callback is being forwarded: the agent retries
        ack = asyncio.get_running_loop().create_future()
        self._acks[call_id] = ack
        try:
            if not await self.forward_to(holder, "callback", call_id, token, body):
                return None
            try:
                async with asyncio.timeout(max(self._directory.lease_seconds, 1.0)):
                    outcome = await ack
            except TimeoutError:
                logger.warning("master %s did not answer the forwarded callback of call %s", holder, call_id)
                return "unanswered"
        finally:
            self._acks.pop(call_id, None)
        if outcome in ("accepted", "duplicate", "forwarded"):
            return "forwarded"
        return cast(DeliveryStatus, outcome) if outcome in _DELIVERY_STATUSES else "unknown"

    def _agent_changed(self, change: str, agent: LiveAgent) -> None:
        """An agent registered on this master: its calls waiting on another master's connection end."""
        if change == "added":
            self._moved(agent.agent_id, self._directory.master_id)

    def _moved(self, agent_id: str, new_master: str) -> None:
        """Fail the calls sent to ``agent_id`` through a master other than ``new_master``, the one
        it has registered on since: the old connection is gone (or replaced), no result will come."""
        for call_id, agent in list(self._waiting.items()):
            if agent.agent_id == agent_id and agent.master_id != new_master:
                self._waiting.pop(call_id, None)
                self._dispatcher.settle_remote(
                    call_id,
                    error=AgentDisconnected(
                        f"agent {agent_id!r} reconnected elsewhere (it registered again on master"
                        f" {new_master!r}) while the call was in flight through master {agent.master_id!r}"
                    ),
                )

    def _check_owners(self) -> None:
        """Fail at once the calls whose agent registered on another master since, or whose
        owner's lease expired."""
        for agent_id in {agent.agent_id for agent in self._waiting.values()}:
            owner = self._directory.owner(agent_id)
            if owner is not None and self._directory.alive(owner):
                self._moved(agent_id, owner)
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

    async def post(self, master_id: str, message: dict[str, Any]) -> None:
        """Add ``message`` (with its ``kind``) to master ``master_id``'s inbox; raises
        :class:`AgentUnavailable` when Redis does not take it."""
        await self._outbox.post(master_id, message)

    async def _read_forever(self) -> None:
        """``XREAD BLOCK`` in a loop on a connection held for it (no pool round per read), up to
        :data:`READ_COUNT` entries per wake-up: under load, one read brings every message that
        arrived meanwhile."""
        last = "0"
        connection: Any = None
        try:
            while True:
                try:
                    if connection is None:
                        connection = await self._redis.connection_pool.get_connection()  # type: ignore[no-untyped-call]
                    await connection.send_packed_command(
                        hiredis.pack_command(
                            cast(  # its stub types a 1-tuple
                                Any,
                                (
                                    "XREAD",
                                    "COUNT",
                                    READ_COUNT,
                                    "BLOCK",
                                    BLOCK_MS,
                                    "STREAMS",
                                    self._inbox,
                                    last,
                                ),
                            )
                        ),
                        check_health=False,
                    )
                    reply = await connection.read_response()
                except (RedisError, OSError) as exc:
                    logger.warning("reading the cluster inbox failed (%s); retrying", exc)
                    if connection is not None:
                        await connection.disconnect(nowait=True)
                    await asyncio.sleep(0.5)
                    continue
                streams = (
                    reply.values() if isinstance(reply, dict) else [entries for _, entries in reply or ()]
                )
                for entries in streams:  # a map (RESP3) or a list of pairs (RESP2)
                    for entry_id, fields in entries:
                        last = entry_id if isinstance(entry_id, str) else entry_id.decode()
                        try:
                            self._handle(_message(fields))
                        except (ValueError, KeyError, TypeError) as exc:
                            logger.warning("skipping a bad cluster message %s: %s", last, exc)
        finally:
            if connection is not None:
                await connection.disconnect(nowait=True)
                await self._redis.connection_pool.release(connection)

    def _handle(self, message: dict[str, Any]) -> None:
        kind = message.get("kind")
        handler = self.handlers.get(str(kind))
        if handler is not None:
            handler(message)
        elif kind == "call":
            call_id = str(message["call_id"])
            if call_id in self._served:  # the same XADD sent twice (a retry after a lost reply)
                logger.warning("skipping call %s: it came twice", call_id)
                return
            self._served[call_id] = None
            if len(self._served) > SERVED_MEMORY:
                self._served.popitem(last=False)
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
            token, origin = str(message["token"]), message.get("origin")
            outcome = self._dispatcher.resolve_callback(token, result)
            if outcome != "accepted":
                logger.info("forwarded callback of call %s: %s", result.call_id, outcome)
            # "unknown": not in this master's memory (it restarted under the same
            # OPENAGENT_MASTER_ID): record the result in the session, as a master finding the
            # holder gone would. Then answer the master that forwarded it.
            task = asyncio.create_task(
                self._answer_callback(str(origin or ""), outcome, token, result),
                name=f"cluster-callback-{result.call_id}",
            )
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)
        elif kind == "callback_ack":
            ack = self._acks.get(str(message["call_id"]))
            if ack is not None and not ack.done():
                ack.set_result(str(message.get("outcome")))
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

    async def _answer_callback(self, origin: str, outcome: str, token: str, result: ToolResult) -> None:
        records = self._dispatcher.records
        if outcome == "unknown" and records is not None:
            try:
                outcome = (await records.deliver(token, result)).status
            except SessionStoreUnavailable as exc:
                logger.warning("forwarded callback of call %s could not be recorded: %s", result.call_id, exc)
                return  # no answer: the forwarding master tells the agent to retry
            logger.info("forwarded callback of call %s: %s", result.call_id, outcome)
        if origin:
            await self._post_quietly(
                origin, {"kind": "callback_ack", "call_id": result.call_id, "outcome": outcome}
            )

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
            # The caller's tool-call span is the parent: the agent's span joins the caller's query
            # trace (nothing to build while tracing is off: this runs for every call served).
            span = (
                tracing.continued(
                    message.get("traceparent"),
                    f"remote tool {agent.agent_id}.{message['tool_name']}",
                    {"openagent.call_id": str(message["call_id"]), "openagent.origin_master": origin},
                )
                if tracing.active()
                else contextlib.nullcontext()
            )
            with span:
                arguments = message.get("arguments")
                reply["result"] = await self._dispatcher.call(
                    agent,
                    str(message["tool_name"]),
                    arguments if isinstance(arguments, dict) else {},
                    wait_seconds=float(message["timeout"]),
                    on_progress=forward_progress,
                )
            reply["success"] = True
        except ToolCallError as exc:
            reply.update(success=False, error=str(exc), error_kind=_kind(exc))
        if forwarded:
            await asyncio.gather(*forwarded)  # the caller sees the progress before the result
        await self._post_quietly(origin, reply)

    async def _post_quietly(self, master_id: str, message: dict[str, Any]) -> None:
        try:
            await self._outbox.post(master_id, message)
        except AgentUnavailable as exc:
            logger.warning("could not send %s of call %s: %s", message["kind"], message["call_id"], exc)
