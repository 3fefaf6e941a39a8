"""A2A tasks in the master's Redis: :class:`RedisTaskStore` and the context → session map.

Every master of a cluster reads and writes the same records, so ``GetTask``, ``ListTasks``,
``CancelTask`` and ``SubscribeToTask`` answer on any master, and after a restart, until the
session TTL (``REDIS_SESSION_TTL_SECONDS``) has passed since the task last changed.

The store is a :class:`a2a.server.cluster.VersionedTaskStore`: each write names the version it
was derived from and fails (:class:`ConcurrentTaskModificationError`) when another writer got in
between. That is how a ``CancelTask`` answered by another master stops a run: it writes
``CANCELED`` (allowed over any non-terminal state), and the master running the task fails its
next write, reloads, sees ``CANCELED`` and cancels its executor (the SDK's
:class:`~a2a.server.agent_execution.active_task.ActiveTask`).

Keys (:mod:`master.storage.redis_keys`, all with the session TTL):

- ``a2a:task:{task_id}`` → HASH ``task`` (the task, binary protobuf), ``version`` (a counter),
  ``state`` (the state's number), ``scope`` (the agent id, or ``""`` for the hub endpoint),
  ``updated`` (milliseconds), and ``tenant`` for a task of a tenant other than ``default``;
- ``a2a:tasks:{scope}`` → ZSET of task ids by ``updated``, for ``ListTasks``;
- ``a2a:context:{context_id}`` → the hub ``session_id`` that holds the context's turns (per
  tenant: :func:`master.storage.redis_keys.a2a_context_key`);
- ``a2a:waiting:{session_id}`` → the task that is ``INPUT_REQUIRED`` while the session's run waits
  for approvals (:meth:`RedisTaskStore.claim_waiting`).

A task belongs to the tenant of the key that created it: for another tenant's key (not an
administrator's) it does not exist (``GetTask``, ``ListTasks``, ``CancelTask``, ``SubscribeToTask``).
The store filters by the :class:`~master.auth.Scope` of the request's principal itself; a request
the door attached no principal to is :data:`~master.auth.ANONYMOUS` and sees no task.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from typing import Any

import redis.asyncio as aioredis
from a2a.helpers import new_text_message
from a2a.server.cluster import (
    ConcurrentTaskModificationError,
    StoredTask,
    TaskEventStream,
    TaskVersion,
    VersionedEvent,
    VersionedTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Role, Task, TaskState
from a2a.utils.errors import InternalError, InvalidParamsError
from redis.exceptions import RedisError

from master.auth import ANONYMOUS, DEFAULT_TENANT, SYSTEM, Principal, Scope, TenantRecords
from master.errors import SessionStoreUnavailable
from master.runs.store import RunStore
from master.storage.redis_keys import A2A_CANCELED_CHANNEL as CANCELED_CHANNEL
from master.storage.redis_keys import a2a_context_key as context_key
from master.storage.redis_keys import a2a_events_channel as events_channel
from master.storage.redis_keys import a2a_index_key as index_key
from master.storage.redis_keys import a2a_task_key as task_key
from master.storage.redis_keys import a2a_waiting_key as waiting_key

logger = logging.getLogger("master.doors.a2a")

RUN_ID_KEY = "openagent_run_id"
"""The task metadata that names the hub run answering it (``GET /runs/{run_id}``)."""

SCOPE_KEY = "openagent.a2a.scope"
"""Where :class:`ServerCallContext.state` holds the endpoint's scope: an agent id, or ``""`` (the hub)."""

PRINCIPAL_KEY = "openagent.a2a.principal"
"""Where :class:`ServerCallContext.state` holds who sent the request (:class:`master.auth.Principal`)."""

STREAMING_KEY = "openagent.a2a.streaming"
"""Where :class:`ServerCallContext.state` says whether the request streams (``SendStreamingMessage``)."""

TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)

LIST_LIMIT = 1000
"""``ListTasks`` looks at the most recently updated tasks of an endpoint, at most this many."""
DEFAULT_PAGE_SIZE = 50
RECHECK_SECONDS = 15.0
"""A subscription to a task run on another master reads the task again after this long without news."""
NEW_IDS_KEPT = 10_000
"""New task ids remembered until their first write (:meth:`RedisTaskStore.expect_new`)."""


# KEYS: task, index. ARGV: prev_version, task (binary protobuf), state, scope, updated_ms, ttl, cancel, task_id,
# terminal states (comma-separated), events channel, canceled channel, the canceled state, the
# owner tenant ('' for default: recorded by the write that creates the task).
# Returns the new version, or -1 (stale, or a cancel of a terminal task), or -2 (another
# endpoint's task). A write publishes "<version>:<task>" on the task's events channel,
# and its id on the canceled channel when it cancels it: one round trip per event.
_SAVE = """
local cur = redis.call('HGET', KEYS[1], 'version')
local scope = redis.call('HGET', KEYS[1], 'scope')
if scope and scope ~= ARGV[4] then return -2 end
if ARGV[7] == '1' then
  if not cur then return -1 end
  local state = redis.call('HGET', KEYS[1], 'state')
  for s in string.gmatch(ARGV[9], '[^,]+') do
    if s == state then return -1 end
  end
elseif (cur or '0') ~= ARGV[1] then
  return -1
end
local new = (tonumber(cur) or 0) + 1
redis.call('HSET', KEYS[1], 'task', ARGV[2], 'version', new, 'state', ARGV[3], 'scope', ARGV[4],
  'updated', ARGV[5])
if not cur and ARGV[13] ~= '' then redis.call('HSET', KEYS[1], 'tenant', ARGV[13]) end
redis.call('EXPIRE', KEYS[1], ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[8])
redis.call('EXPIRE', KEYS[2], ARGV[6])
redis.call('PUBLISH', ARGV[10], new .. ':' .. ARGV[2])
if ARGV[3] == ARGV[12] then redis.call('PUBLISH', ARGV[11], ARGV[8]) end
return new
"""


def scope_of(context: ServerCallContext) -> str:
    """The endpoint a request came through: an agent id, or ``""`` for the hub."""
    scope = context.state.get(SCOPE_KEY, "")
    return scope if isinstance(scope, str) else ""


def principal_of_call(context: ServerCallContext) -> Principal:
    """Who sent the request (:data:`~master.auth.ANONYMOUS` when the door attached no one: fail closed)."""
    principal = context.state.get(PRINCIPAL_KEY)
    return principal if isinstance(principal, Principal) else ANONYMOUS


def _unavailable(exc: RedisError) -> InternalError:
    return InternalError(message=f"the task store (Redis) is not answering: {exc}")


class RedisTaskStore(VersionedTaskStore, TenantRecords):
    """A2A tasks in Redis, shared by every master, versioned (module docstring).

    A task belongs to the endpoint that created it (the hub or one agent): asked through
    another endpoint, it does not exist.
    """

    def __init__(self, redis: aioredis.Redis, *, ttl_seconds: int, runs: RunStore | None = None) -> None:
        """``redis``: a client that answers bytes (``decode_responses=False``); ``runs``: the run
        records, to report a task whose run's master was lost as ``FAILED``."""
        self._redis = redis
        self._runs = runs
        self._ttl = ttl_seconds
        self._save = redis.register_script(_SAVE)
        self._terminal = ",".join(str(int(state)) for state in TERMINAL_STATES)
        self._new: OrderedDict[str, None] = OrderedDict()

    def expect_new(self, task_id: str) -> None:
        """``task_id`` was just made here for a new task: until its first write, reading it needs
        no round trip (no master can have it; the SDK reads it three times before it writes it)."""
        self._new[task_id] = None
        if len(self._new) > NEW_IDS_KEPT:
            self._new.popitem(last=False)

    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        del event, prev
        cancel = task.status.state == TaskState.TASK_STATE_CANCELED
        version = _counter(prev_version)
        self._new.pop(task.id, None)
        try:
            result = await self._save(
                keys=[task_key(task.id), index_key(scope_of(context))],
                args=[
                    str(version),
                    task.SerializeToString(),
                    str(int(task.status.state)),
                    scope_of(context),
                    str(int(time.time() * 1000)),
                    str(self._ttl),
                    "1" if cancel else "0",
                    task.id,
                    self._terminal,
                    events_channel(task.id),
                    CANCELED_CHANNEL,
                    str(int(TaskState.TASK_STATE_CANCELED)),
                    _recorded_tenant(principal_of_call(context)),
                ],
            )
        except RedisError as exc:
            raise _unavailable(exc) from None
        if int(result) < 0:
            raise ConcurrentTaskModificationError(task.id)
        return TaskVersion(int(result))

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        if task_id in self._new:
            return None
        try:
            raw = await self._redis.hmget(task_key(task_id), _FIELDS)
        except RedisError as exc:
            raise _unavailable(exc) from None
        seen = Scope.of(principal_of_call(context))
        stored = self._visible("get", raw, scope_of(context), seen)
        return await self._lost_run(stored, seen) if stored is not None else None

    def _visible(self, what: str, raw: list[Any], endpoint: str, seen: Scope) -> StoredTask | None:
        """The task of ``raw`` when it is ``endpoint``'s and ``seen`` sees its tenant."""
        body, version, owner, tenant = raw
        if body is None or owner is None or owner.decode() != endpoint:
            return None
        if not self._sees(what, seen, tenant.decode() if tenant is not None else None):
            return None
        return StoredTask(Task.FromString(body), TaskVersion(int(version)))

    async def _lost_run(self, stored: StoredTask, seen: Scope) -> StoredTask:
        """A ``WORKING`` task not updated for a run lease, whose run failed (its master was lost):
        read as ``FAILED`` with the reason, rather than ``WORKING`` forever; one whose run was
        cancelled (by any door, its master lost before it wrote the task), and an
        ``INPUT_REQUIRED`` task whose paused run was cancelled: ``CANCELED``. A working task updated
        more recently costs no read of the run."""
        task = stored.task
        runs = self._runs
        waiting = task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if (
            runs is None
            or (task.status.state != TaskState.TASK_STATE_WORKING and not waiting)
            or RUN_ID_KEY not in task.metadata
        ):
            return stored
        if not waiting and time.time() - task.status.timestamp.ToSeconds() < runs.lease_seconds:
            return stored
        try:
            record = await runs.get(str(task.metadata[RUN_ID_KEY]), seen)
        except SessionStoreUnavailable as exc:
            raise InternalError(message=str(exc)) from None
        ends = ("cancelled",) if waiting else ("cancelled", "failed")
        if record is None or record["state"] not in ends:
            return stored
        cancelled = record["state"] == "cancelled"
        task.status.state = TaskState.TASK_STATE_CANCELED if cancelled else TaskState.TASK_STATE_FAILED
        task.status.message.CopyFrom(
            new_text_message(
                f"the run was {record['reason'] or 'cancelled'}"
                if cancelled
                else f"the run failed: {record['reason']}",
                context_id=task.context_id,
                task_id=task.id,
                role=Role.ROLE_AGENT,
            )
        )
        task.status.timestamp.GetCurrentTime()
        return stored

    async def get_any(self, task_id: str) -> StoredTask | None:
        """The task whatever its endpoint (the event stream's catch-up read)."""
        try:
            raw = await self._redis.hmget(task_key(task_id), _FIELDS)
        except RedisError as exc:
            raise _unavailable(exc) from None
        endpoint = raw[2].decode() if isinstance(raw[2], bytes) else ""
        return self._visible("get_any", raw, endpoint, Scope.of(SYSTEM))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        scope = scope_of(context)
        seen = Scope.of(principal_of_call(context))
        try:
            found: list[Any] = await self._redis.zrevrange(index_key(scope), 0, LIST_LIMIT - 1)
            ids = [i.decode() for i in found]
            async with self._redis.pipeline(transaction=False) as pipe:
                for task_id in ids:
                    pipe.hmget(task_key(task_id), _FIELDS)
                rows = await pipe.execute()
        except RedisError as exc:
            raise _unavailable(exc) from None
        tasks: list[Task] = []
        gone: list[str] = []
        for task_id, raw in zip(ids, rows, strict=True):
            if raw[0] is None:
                gone.append(task_id)
                continue
            stored = self._visible("list", raw, scope, seen)
            if stored is None:  # another endpoint's or tenant's
                continue
            task = (
                await self._lost_run(stored, seen)
            ).task  # FAILED, as get() reads it, if its master was lost
            if params.context_id and task.context_id != params.context_id:
                continue
            if params.status and task.status.state != params.status:
                continue
            if params.HasField("status_timestamp_after") and (
                task.status.timestamp.ToNanoseconds() < params.status_timestamp_after.ToNanoseconds()
            ):
                continue
            tasks.append(task)
        if gone:  # expired records: drop them from the index
            try:
                await self._redis.zrem(index_key(scope), *gone)
            except RedisError:
                pass
        start = _page_start(params.page_token)
        size = params.page_size or DEFAULT_PAGE_SIZE
        end = start + size
        return ListTasksResponse(
            tasks=tasks[start:end],
            next_page_token=str(end) if end < len(tasks) else "",
            page_size=size,
            total_size=len(tasks),
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        scope = scope_of(context)
        try:
            if await self.get(task_id, context) is not None:
                await self._redis.delete(task_key(task_id))
                await self._redis.zrem(index_key(scope), task_id)
        except RedisError as exc:
            raise _unavailable(exc) from None

    # The context → session map (module docstring).

    async def session_of(self, context_id: str, tenant: str = DEFAULT_TENANT) -> str | None:
        """The hub session that holds ``context_id``'s turns, if ``tenant`` knows the context."""
        try:
            value: Any = await self._redis.get(context_key(context_id, tenant))
        except RedisError as exc:
            raise _unavailable(exc) from None
        return value.decode() if isinstance(value, bytes) else None

    async def remember_session(self, context_id: str, session_id: str, tenant: str = DEFAULT_TENANT) -> None:
        """Map ``tenant``'s ``context_id`` to ``session_id`` (refreshing the TTL, as the session's own)."""
        try:
            await self._redis.set(context_key(context_id, tenant), session_id, ex=self._ttl)
        except RedisError as exc:
            logger.warning("could not record the session of A2A context %s: %s", context_id, exc)

    # The task that waits for a session's approvals (module docstring).

    async def wait_for_approvals(self, session_id: str, task_id: str) -> None:
        """``task_id`` is ``INPUT_REQUIRED`` until the approvals of ``session_id``'s run are decided."""
        try:
            await self._redis.set(waiting_key(session_id), task_id, ex=self._ttl)
        except RedisError as exc:
            logger.warning("could not record the A2A task waiting on session %s: %s", session_id, exc)

    async def claim_waiting(self, session_id: str) -> str | None:
        """Take the task waiting on ``session_id``'s approvals (of several masters, one gets it)."""
        try:
            value: Any = await self._redis.getdel(waiting_key(session_id))
        except RedisError as exc:
            raise _unavailable(exc) from None
        return value.decode() if isinstance(value, bytes) else None

    async def change(self, task_id: str, change: Callable[[Task], None], *, attempts: int = 5) -> bool:
        """Apply ``change`` to the stored task and write it (a new version, published to its
        subscribers), reading it again when another write got in between. False when the task is
        gone or already ended."""
        for _ in range(attempts):
            try:
                raw = await self._redis.hmget(task_key(task_id), _FIELDS)
            except RedisError as exc:
                raise _unavailable(exc) from None
            scope = raw[2].decode() if isinstance(raw[2], bytes) else ""
            stored = self._visible("change", raw, scope, Scope.of(SYSTEM))
            if stored is None or stored.task.status.state in TERMINAL_STATES:
                return False
            task = stored.task
            change(task)
            context = ServerCallContext(state={SCOPE_KEY: scope, PRINCIPAL_KEY: SYSTEM})
            try:
                await self.save(task, event=None, prev=None, prev_version=stored.version, context=context)
                return True
            except ConcurrentTaskModificationError:
                continue
        return False


def _counter(version: TaskVersion) -> int:
    if version.is_missing:
        return 0
    value = version._value  # the store's own counter
    return int(value)


_FIELDS = ["task", "version", "scope", "tenant"]


def _recorded_tenant(principal: Principal) -> str:
    return "" if principal.tenant == DEFAULT_TENANT else principal.tenant


def _page_start(token: str) -> int:
    if not token:
        return 0
    try:
        start = int(token)
    except ValueError:
        raise InvalidParamsError(message=f"invalid page token {token!r}") from None
    if start < 0:
        raise InvalidParamsError(message=f"invalid page token {token!r}")
    return start


class RedisEventStream(TaskEventStream):
    """A task's changes for the masters that do not run it (``SubscribeToTask``), on Redis.

    Every write of the store already publishes the task as written (see ``_SAVE``), so
    :meth:`publish` has nothing to add: a master following a task run elsewhere hands on the
    task as it is after each change (a ``Task`` event). A ``CANCELED`` write is also published
    on :data:`CANCELED_CHANNEL`, which :meth:`watch_cancels` follows: the master running the
    task cancels it at once, instead of at its next write.
    """

    def __init__(self, redis: aioredis.Redis, store: RedisTaskStore) -> None:
        self._redis = redis
        self._store = store

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        """Nothing to do: the store published the write (class docstring)."""

    async def subscribe(self, task_id: str, *, after: TaskVersion) -> AsyncGenerator[VersionedEvent, None]:
        """The task after each write newer than ``after``. Every :data:`RECHECK_SECONDS` without
        news it is read again, so that a lost message or a write of a master that stopped
        publishing still reaches the subscriber; the SDK ends the subscription at a terminal state."""
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        last = after
        try:
            await pubsub.subscribe(events_channel(task_id))
            while True:
                # The first time: what changed between the caller's snapshot and the subscription.
                stored = await self._store.get_any(task_id)
                if stored is not None and stored.version.is_after(last):
                    last = stored.version
                    yield VersionedEvent(stored.task, stored.version)
                while (message := await pubsub.get_message(timeout=RECHECK_SECONDS)) is not None:
                    raw, _, body = message["data"].partition(b":")
                    version = TaskVersion(int(raw))
                    if version.is_after(last):
                        last = version
                        yield VersionedEvent(Task.FromString(body), version)
        except RedisError as exc:
            raise _unavailable(exc) from None
        finally:
            try:
                await pubsub.aclose()  # type: ignore[no-untyped-call]
            except RedisError:  # pragma: no cover - the connection is dropped either way
                pass

    async def destroy(self, task_id: str) -> None:
        """Nothing to release: a channel exists only while someone listens."""

    async def watch_cancels(self, on_cancel: Callable[[str], None], *, retry_seconds: float = 1.0) -> None:
        """Call ``on_cancel(task_id)`` for every task a master marks ``CANCELED``; runs until cancelled."""
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(CANCELED_CHANNEL)
                while True:
                    message = await pubsub.get_message(timeout=RECHECK_SECONDS)
                    if message is not None:
                        on_cancel(message["data"].decode())
            except RedisError as exc:
                logger.warning("A2A cancellations: Redis is not answering (%s); retrying", exc)
            finally:
                try:
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                except RedisError:  # pragma: no cover
                    pass
            await asyncio.sleep(retry_seconds)
