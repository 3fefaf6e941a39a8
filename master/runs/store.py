"""Runs: every query's run has a record in Redis, and no run is left ``running`` by a lost master.

A run is one answer being worked out: a query, or the continuation of a paused or halted one
under the same ``run_id``. Its record (``run:{run_id}``, :mod:`master.storage.redis_keys`) says its
state (``running``, ``awaiting_approval``, ``awaiting_tool_results``, ``stopped``, ``completed``,
``failed``), which master holds it, its session, the tool calls it completed and the ones in
flight. Off the hot path as far as it goes:

- a run starts in this master's memory only (:meth:`RunStore.begin`, no round trip), and is
  nobody's business until the query service has accepted its request (:meth:`RunStore.accept`):
  a request refused before that (unknown session, bad attachment, unknown agent...) leaves no
  record, since a record would keep what the refusal names (a file name, a session id);
- before a round's tool calls are sent, the run's record is written ``running`` with them in
  flight, awaited (:meth:`RunStore.sending`): a master lost at any moment after leaves every call
  that may have reached an agent listed, to become ``unknown``; a run that makes no call costs no
  such write;
- the holder's lease and the records of the runs that changed since the last tick (calls come
  back) are written together, in one pipeline per tick (a third of
  ``OPENAGENT_RUN_LEASE_SECONDS``), for every run of the master: one lease
  (``run_lease:{master_id}``, a token new at every start), not one per run;
- the end is one pipelined write (:meth:`RunStore.end`): the final state, the calls, and the
  checkpoint of a run that can resume (a budget halt), or its removal.

Before a call that must never run twice is sent (an approved call), :meth:`RunStore.save`
writes the run's checkpoint along with the record, awaited. When a master dies,
its lease expires; any live master (its tick's sweep, or a ``GET /runs/{run_id}``) then marks its
running runs ``failed`` with a reason naming the lost master, in a script that checks the
lease it saw is still the record's (cluster-safe: two masters sweeping mark a run once). The
calls it had in flight become ``unknown``: never run again, reported as such on a resume.

A run is cancelled from any master (:meth:`RunStore.cancel`, ``DELETE /runs/{run_id}``): its id
goes out on :data:`~master.storage.redis_keys.RUNS_CANCEL_CHANNEL`, which every master follows; the one
holding the run cancels its task, and the run ends ``cancelled``, its calls in flight ``unknown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.auth import Scope, TenantRecords
from master.errors import SessionStoreUnavailable
from master.runs.record import (
    CLAIM,
    MARK_LOST,
    SET_RUNNING,
    LiveRun,
    call_of,
    dumps,
    read_row,
    row_of,
    shown,
    went_past,
)
from master.runs.state import RunState, RunStatus, read_state
from master.storage.redis_client import GroupCommit
from master.storage.redis_keys import (
    RUNS_CANCEL_CHANNEL,
    RUNS_RUNNING_KEY,
    run_checkpoint_key,
    run_key,
    run_lease_key,
)

__all__ = ["RESUMABLE", "LiveRun", "RunStore", "call_of"]

logger = logging.getLogger("master.runs.store")

RESUMABLE: tuple[RunStatus, ...] = ("stopped", "failed")
"""States ``POST /runs/{run_id}/resume`` takes (a failed run only with a checkpoint)."""


class RunStore(TenantRecords):
    """The run records of this master (see the module docstring). Reads take the asker's
    :class:`~master.auth.Scope`: another tenant's run is unknown."""

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        master_id: str,
        lease_seconds: float,
        keep_seconds: int,
        timeout_seconds: float = 5.0,
    ) -> None:
        self._redis = redis
        self.master_id = master_id
        self.lease_seconds = lease_seconds
        self.keep_seconds = keep_seconds
        self._timeout = timeout_seconds
        self.token = uuid.uuid4().hex
        """This life of the master: a restart under the same ``OPENAGENT_MASTER_ID`` holds a new
        token, so the runs of its previous life are seen as lost."""
        self._live: set[LiveRun] = set()
        self._ended: list[tuple[LiveRun, RunStatus, str | None]] = []
        """Ends not written yet (a cancelled run, or a write that failed): the next tick writes them."""
        self._mark_lost = redis.register_script(MARK_LOST)
        self._claim = redis.register_script(CLAIM)
        self._set_running = redis.register_script(SET_RUNNING)
        self._writes = GroupCommit(redis)
        """The in-flight writes of concurrent runs, batched (one socket write for those made at once)."""
        self._unlisted: list[str] = []
        """Runs that ended with their final record written along with the session's answer but
        are still in the running set: the next tick removes them, in its one pipeline."""
        self._task: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    # ------------------------------------------------------------------ a run's life

    def begin(
        self, run_id: str, *, query_id: str, session_id: str | None, tenant: str | None = None
    ) -> LiveRun:
        """A new run held here, in memory only until it is accepted (:meth:`accept`)."""
        return LiveRun(run_id, query_id, session_id, tenant)

    async def accept(self, live: LiveRun) -> None:
        """The query service accepted the run's request: from now on the run has a record (the
        next tick, its end, or now when its door names it before the end: :attr:`LiveRun.announce`)."""
        if live.accepted:
            return
        live.accepted = True
        self._live.add(live)
        if live.announce:
            await self.announce(live)

    async def end(self, live: LiveRun, state: RunStatus, *, reason: str | None = None) -> None:
        """Write the run's final state (one pipeline). A failing write is retried at the next tick
        and logged; it never fails the answer. A run never accepted (its request was refused)
        ends without a record."""
        self._live.discard(live)
        if not live.accepted:
            return
        try:
            async with asyncio.timeout(self._timeout):
                if live.synced is None and live.checkpoint is None:  # the common case: one SET
                    record = self._row_of(live, state, reason)
                    await self._redis.set(run_key(live.run_id), record, ex=self.keep_seconds)
                    return
                async with self._redis.pipeline(transaction=True) as pipe:
                    self._write_end(pipe, live, state, reason)
                    await pipe.execute()
        except (RedisError, TimeoutError) as exc:
            logger.warning("run %s: could not record its end (%s); retrying", live.run_id, exc)
            self._ended.append((live, state, reason))

    def final_record(
        self, live: LiveRun, state: RunStatus, reason: str | None = None
    ) -> tuple[str, str, int] | None:
        """``(key, value, ttl)`` of the run's final record, for a caller that writes it along with
        its own last write (the session's answer), then calls :meth:`ended`; ``None`` when the end
        needs more than one key (a run that can resume or had a checkpoint, or one renamed): :meth:`end`. A run already
        written ``running`` leaves the running set at the next tick (the sweep reads only records
        that say ``running``)."""
        if live.checkpoint is not None or live.checkpoint_stored:
            return None
        if live.synced is not None and live.synced != live.run_id:
            return None
        self._live.discard(live)  # no tick may write it running after this
        if live.synced is not None:
            self._unlisted.append(live.run_id)
        return run_key(live.run_id), self._row_of(live, state, reason), self.keep_seconds

    def ended(self, live: LiveRun) -> None:
        """The record of :meth:`final_record` was written."""
        live.ended = True
        self._live.discard(live)

    def abandon(self, live: LiveRun, reason: str) -> None:
        """The run stopped without an answer (cancelled): recorded ``failed`` at the next tick."""
        self._live.discard(live)
        if live.ended or not live.accepted:
            return
        if live.cancelled is not None:
            self._ended.append((live, "cancelled", live.cancelled))
            return
        self._ended.append((live, "failed", reason))

    async def announce(self, live: LiveRun) -> None:
        """Write the run ``running`` now (a door that names the run before its end: a stream);
        a Redis failure is logged, the next tick writes it."""
        try:
            async with asyncio.timeout(self._timeout), self._redis.pipeline(transaction=False) as pipe:
                self._write_running(pipe, live)
                await pipe.execute()
            live.dirty = False
        except (RedisError, TimeoutError) as exc:
            logger.warning("run %s: could not record its start (%s)", live.run_id, exc)
            live.synced = None

    async def sending(self, live: LiveRun, calls: Iterable[tuple[str, str, Any]]) -> None:
        """Calls ``(id, function name, arguments)`` about to be sent: the run's record holds them
        in flight before any is sent, so a master lost at any moment after leaves every call that
        may have reached an agent ``unknown``. A call that cannot be recorded is not sent: raises
        :class:`SessionStoreUnavailable`."""
        live.sending(calls)
        try:
            async with asyncio.timeout(self._timeout):
                if live.synced is None or live.synced == live.run_id:  # the common case: one command
                    row = self._row_of(live, "running", None)
                    keys = [run_key(live.run_id), RUNS_RUNNING_KEY]
                    await self._writes.run(self._set_running, keys, [row, self.keep_seconds, live.run_id])
                    live.synced = live.run_id
                else:
                    async with self._redis.pipeline(transaction=True) as pipe:
                        self._write_running(pipe, live)
                        await pipe.execute()
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        live.dirty = False

    async def save(self, live: LiveRun, checkpoint: RunState) -> None:
        """Write the run ``running`` with its calls in flight and ``checkpoint``, now (before a
        call that must not run twice is sent). Raises :class:`SessionStoreUnavailable`."""
        live.checkpoint, live.checkpoint_calls = checkpoint, len(live.completed)
        live.checkpoint_stored = True
        try:
            async with asyncio.timeout(self._timeout), self._redis.pipeline(transaction=True) as pipe:
                self._write_running(pipe, live)
                pipe.set(run_checkpoint_key(live.run_id), checkpoint.model_dump_json(), ex=self.keep_seconds)
                await pipe.execute()
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc

    # ------------------------------------------------------------------ reading and resuming

    async def get(self, run_id: str, scope: Scope) -> dict[str, Any] | None:
        """The run's record, ``None`` when unknown (or ``scope`` does not see it). A ``running``
        run whose holder's lease is gone is marked ``failed`` first. Raises
        :class:`SessionStoreUnavailable`."""
        self._scoped("get", scope)
        try:
            async with asyncio.timeout(self._timeout):
                row = read_row(await self._redis.get(run_key(run_id)))
                if row is None or not scope.sees(row.get("tenant")):
                    return None  # another tenant's run: not even its lease is looked at
                if row.get("state") == "running" and await self._lost([(run_id, row)]):
                    row = read_row(await self._redis.get(run_key(run_id)))
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        if row is None or not scope.sees(row.get("tenant")):
            return None
        return shown(run_id, row)

    async def checkpoint(self, run_id: str, scope: Scope) -> RunState | None:
        """What the run resumes from, or ``None`` (also for a run ``scope`` does not see, and for
        a checkpoint that is not a :class:`RunState`: logged, the run is not resumable).
        Raises :class:`SessionStoreUnavailable`."""
        if await self.get(run_id, scope) is None:
            return None
        try:
            async with asyncio.timeout(self._timeout):
                raw = await self._redis.get(run_checkpoint_key(run_id))
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        return read_state(raw, where=f"run {run_id}")

    async def claim(self, run_id: str, states: Sequence[RunStatus]) -> tuple[bool, str]:
        """Take the run for this master if it is in one of ``states`` (atomic: of two callers one
        wins). Returns ``(won, the state it was in)``. Raises :class:`SessionStoreUnavailable`."""
        try:
            async with asyncio.timeout(self._timeout):
                won, state = await self._claim(
                    keys=[run_key(run_id), RUNS_RUNNING_KEY],
                    args=[self.master_id, self.token, time.time(), run_id, *states],
                )
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        return bool(won), str(state)

    async def release(self, run_id: str, state: str) -> None:
        """Give back a run claimed for a resume that did not start (not admitted)."""
        try:
            async with asyncio.timeout(self._timeout):
                row = read_row(await self._redis.get(run_key(run_id)))
                if row is None:
                    return
                row.update(state=state, updated_at=time.time())
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.set(run_key(run_id), dumps(row), keepttl=True)
                    pipe.srem(RUNS_RUNNING_KEY, run_id)
                    await pipe.execute()
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc

    def claimed(self, live: LiveRun, record: dict[str, Any], checkpoint: RunState) -> None:
        """``live`` continues the claimed run of ``record`` (same id, its earlier calls kept); if
        it fails before it gets anywhere, it can resume from ``checkpoint`` again. Its record
        exists already: the run is accepted."""
        live.accepted = True
        self._live.add(live)
        live.synced = live.run_id
        live.checkpoint, live.checkpoint_stored = checkpoint, True
        live.query_id = str(record.get("query_id") or live.query_id)
        live.created_at = float(record.get("created_at") or live.created_at)
        live.completed[:0] = record.get("completed") or []
        live.unknown[:0] = record.get("unknown") or []
        live.tenant = record.get("tenant")
        live.checkpoint_calls = len(live.completed)
        live.coordinator = record.get("roles")

    # ------------------------------------------------------------------ the lease and the sweep

    def start(self) -> None:
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name=f"runs-lease {self.master_id}")
        self._watch = asyncio.create_task(self._watch_cancels(), name=f"runs-cancels {self.master_id}")

    # ------------------------------------------------------------------ cancelling, from any master

    async def cancel(self, run_id: str, scope: Scope, *, wait_seconds: float) -> dict[str, Any] | None:
        """Stop a ``running`` run, whichever master holds it: its id is published on
        :data:`~master.storage.redis_keys.RUNS_CANCEL_CHANNEL`, the holder cancels it and records it
        ``cancelled`` (its calls in flight ``unknown``). Returns the record as it is after at most
        ``wait_seconds`` (still ``running`` when its holder did not answer in time), or, unchanged,
        the record of a run that is not running; ``None`` when unknown to ``scope``. Raises
        :class:`SessionStoreUnavailable`."""
        record = await self.get(run_id, scope)
        if record is None or record["state"] != "running":
            return record
        try:
            async with asyncio.timeout(self._timeout):
                await self._redis.publish(RUNS_CANCEL_CHANNEL, run_id)
        except (RedisError, TimeoutError) as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        deadline = time.monotonic() + wait_seconds
        while True:  # the holder's write of the end (or nothing, within wait_seconds)
            now = await self.get(run_id, scope)
            if now is None or now["state"] != "running" or time.monotonic() >= deadline:
                return now
            await asyncio.sleep(0.05)

    def cancel_here(self, run_id: str) -> bool:
        """Cancel the run ``run_id`` if this master holds it (a cancel heard on the channel)."""
        for live in self._live:
            if live.run_id == run_id and live.task is not None and not live.task.done():
                live.cancelled = "cancelled by a client"
                live.task.cancel()
                return True
        return False

    async def _watch_cancels(self) -> None:
        """Follow :data:`~master.storage.redis_keys.RUNS_CANCEL_CHANNEL` until the master stops (a Redis
        outage is retried each second)."""
        while not self._stop.is_set():
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(RUNS_CANCEL_CHANNEL)
                while not self._stop.is_set():
                    message = await pubsub.get_message(timeout=self.lease_seconds)
                    if message is not None:
                        data = message["data"]
                        self.cancel_here(data.decode() if isinstance(data, bytes) else str(data))
            except (RedisError, TimeoutError) as exc:
                logger.warning("run cancellations: Redis is not answering (%s); retrying", exc)
            finally:
                with contextlib.suppress(RedisError):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self._stop.wait()

    async def _loop(self) -> None:
        interval = self.lease_seconds / 3
        while not self._stop.is_set():
            try:
                await self.tick()
            except (RedisError, TimeoutError, SessionStoreUnavailable) as exc:
                logger.warning("run lease not renewed: %s", exc)
            except Exception:  # the loop must survive anything
                logger.exception("run lease tick failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._stop.wait()

    async def tick(self) -> int:
        """Renew the lease, write the runs that changed, sweep lost ones (returns how many)."""
        ended, self._ended = self._ended, []
        unlisted, self._unlisted = self._unlisted, []
        dirty = [live for live in self._live if live.dirty]
        try:
            async with asyncio.timeout(self._timeout), self._redis.pipeline(transaction=False) as pipe:
                pipe.set(run_lease_key(self.master_id), self.token, px=max(1, int(self.lease_seconds * 1000)))
                if unlisted:
                    pipe.srem(RUNS_RUNNING_KEY, *unlisted)
                for live in dirty:
                    live.dirty = False
                    self._write_running(pipe, live)
                for live, state, reason in ended:
                    self._write_end(pipe, live, state, reason)
                pipe.smembers(RUNS_RUNNING_KEY)
                *_, running = await pipe.execute()
        except BaseException:
            for live in dirty:
                live.dirty = True
            self._ended[:0] = ended
            self._unlisted[:0] = unlisted
            raise
        return await self._sweep(sorted(running))

    async def _sweep(self, run_ids: Sequence[str]) -> int:
        if not run_ids:
            return 0
        async with asyncio.timeout(self._timeout):
            rows = [read_row(raw) for raw in await self._redis.mget([run_key(run_id) for run_id in run_ids])]
            gone = [run_id for run_id, row in zip(run_ids, rows, strict=True) if row is None]
            if gone:  # expired with their TTL
                await self._redis.srem(RUNS_RUNNING_KEY, *gone)
            return await self._lost(
                [(run_id, row) for run_id, row in zip(run_ids, rows, strict=True) if row is not None]
            )

    async def _lost(self, rows: Sequence[tuple[str, dict[str, Any]]]) -> int:
        """Mark failed the running runs among ``rows`` whose holder's lease is not theirs."""
        running = [(run_id, row) for run_id, row in rows if row.get("state") == "running"]
        holders = sorted({str(row.get("holder")) for _, row in running})
        if not holders:
            return 0
        leases = dict(zip(holders, await self._redis.mget([run_lease_key(h) for h in holders]), strict=True))
        marked = 0
        for run_id, row in running:
            holder = str(row.get("holder"))
            if leases[holder] == row.get("lease"):
                continue
            reason = (
                f"master {holder!r} holding the run was lost (its lease of "
                f"{self.lease_seconds:g} s expired); calls it had in flight are unknown and were not run again"
            )
            marked += int(
                await self._mark_lost(
                    keys=[run_key(run_id), RUNS_RUNNING_KEY],
                    args=[str(row.get("lease")), reason, time.time(), run_id],
                )
            )
            logger.warning("run %s failed: %s", run_id, reason)
        return marked

    async def aclose(self) -> None:
        """The master stops: the runs it still holds end ``failed`` (their queries were cancelled
        before this), then the lease goes (no other master waits a lease to learn it)."""
        self._stop.set()
        for task in (self._task, self._watch):
            if task is not None:
                # The flag as well as the cancel: redis-py can swallow a cancel that lands while it
                # connects, and the loop must end anyway (within one step's deadline).
                task.cancel()
                await asyncio.wait({task}, timeout=self._timeout + 1)
        for live in list(self._live):
            self.abandon(live, f"master {self.master_id!r} stopped while the run was running")
        ended, self._ended = self._ended, []
        try:
            async with asyncio.timeout(self._timeout), self._redis.pipeline(transaction=True) as pipe:
                for live, state, reason in ended:
                    self._write_end(pipe, live, state, reason)
                pipe.delete(run_lease_key(self.master_id))
                await pipe.execute()
        except (RedisError, TimeoutError) as exc:
            logger.warning("could not record the end of %d run(s): %s", len(ended), exc)

    # ------------------------------------------------------------------ writing

    def _row_of(self, live: LiveRun, state: RunStatus, reason: str | None) -> str:
        return row_of(live, self.master_id, self.token, state, reason)

    def _write_running(self, pipe: Any, live: LiveRun) -> None:
        self._forget_renamed(pipe, live)
        pipe.set(run_key(live.run_id), self._row_of(live, "running", None), ex=self.keep_seconds)
        pipe.sadd(RUNS_RUNNING_KEY, live.run_id)
        live.synced = live.run_id

    def _write_end(self, pipe: Any, live: LiveRun, state: RunStatus, reason: str | None) -> None:
        self._forget_renamed(pipe, live)
        pipe.set(run_key(live.run_id), self._row_of(live, state, reason), ex=self.keep_seconds)
        if live.synced is not None:
            pipe.srem(RUNS_RUNNING_KEY, live.run_id)
        checkpoint = live.checkpoint
        if checkpoint is not None and went_past(live, checkpoint):
            checkpoint = None  # the run went past it: resuming from it would repeat calls
        if checkpoint is not None:
            pipe.set(run_checkpoint_key(live.run_id), checkpoint.model_dump_json(), ex=self.keep_seconds)
        elif live.synced is not None:
            pipe.delete(run_checkpoint_key(live.run_id))

    def _forget_renamed(self, pipe: Any, live: LiveRun) -> None:
        """A run written under a first id that turned out to continue another: drop the first."""
        if live.synced is not None and live.synced != live.run_id:
            pipe.delete(run_key(live.synced))
            pipe.srem(RUNS_RUNNING_KEY, live.synced)
            live.synced = None
