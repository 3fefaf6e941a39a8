"""The session store: conversation turns in Redis.

``session:{session_id}`` holds a JSON array of turns (see the spec's "Session
store"), with TTL ``REDIS_SESSION_TTL_SECONDS`` refreshed on every append.
Appends run as one Lua script, so concurrent queries on one session never lose a
turn, and a query costs two round trips (load, append) whatever the session's length.

An unknown or expired ``session_id`` is refused (HTTP 404, ``unknown_session``)
rather than silently starting an empty conversation: the client then knows the
model has lost the context, and starts a new session by omitting ``session_id``.

A session belongs to the tenant that started it (``session_owner:{id}``, written by the append
that creates the session, for tenants other than ``default`` only). :meth:`SessionStore.load`,
:meth:`SessionStore.visible` and :meth:`SessionStore.delete` take the asker's
:class:`~master.auth.Scope` (required) and treat another tenant's session as unknown, within the
same script and round trip.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.auth import DEFAULT_TENANT, Scope, TenantRecords
from master.conversation.turn_log import SessionTurns as SessionTurns
from master.conversation.turn_log import StoredTurn as StoredTurn
from master.conversation.turn_log import Turn as Turn
from master.conversation.turn_log import TurnLog as TurnLog
from master.conversation.turn_log import merge_log, parse_turns
from master.errors import SessionStoreUnavailable
from master.storage.caches import SizedLRU
from master.storage.json_bytes import dump_json
from master.storage.redis_client import GroupCommit
from master.storage.redis_keys import (
    SUMMARY_LOCK_SECONDS,
    call_record_key,
    paused_call_key,
    paused_run_key,
    plan_claim_key,
    session_key,
    session_owner_key,
    session_summaries_key,
    summary_lock_key,
)


def _state(raw: Any) -> dict[str, Any] | None:
    """A paused run's state from its stored JSON (``None`` when absent or unreadable)."""
    if raw is None:
        return None
    try:
        state = json.loads(raw)
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


# Appends turns to the JSON array without reading it: the stored value always ends with ']',
# which SETRANGE overwrites in place with ",<turns>]". KEYS[2...] are the records of the HTTP
# invocation calls whose outcome these turns store: each still pending one becomes 'stored', so
# a late callback cannot append the result a second time (master.agents.call_records).
# KEYS[2] is the session's owner key: set to ARGV[3] (a tenant, '' for none) by the append that
# creates the session, and its TTL follows the session's, as KEYS[3]'s does (the count of its
# summary turns, written by _APPEND_SUMMARY). KEYS[4...] are call records. With ARGV[4], the last key is the
# run's record, set to ARGV[4] with TTL ARGV[5] in the same trip (master.runs.store: a
# run's end costs no round trip of its own).
_APPEND = """
local n = redis.call('STRLEN', KEYS[1])
if n <= 2 then
  redis.call('SET', KEYS[1], '[' .. ARGV[1] .. ']', 'EX', ARGV[2])
  if ARGV[3] ~= '' then redis.call('SET', KEYS[2], ARGV[3], 'EX', ARGV[2]) end
else
  redis.call('SETRANGE', KEYS[1], n - 1, ',' .. ARGV[1] .. ']')
  redis.call('EXPIRE', KEYS[1], ARGV[2])
  redis.call('EXPIRE', KEYS[2], ARGV[2])
  redis.call('EXPIRE', KEYS[3], ARGV[2])
end
local last = #KEYS
if ARGV[4] then
  redis.call('SET', KEYS[last], ARGV[4], 'EX', ARGV[5])
  last = last - 1
end
for i = 4, last do
  if redis.call('HGET', KEYS[i], 'state') == 'pending' then redis.call('HSET', KEYS[i], 'state', 'stored') end
end
return 1
"""

# Appends a summary turn only if the session still has the ARGV[3] summary turns its query saw
# (KEYS[3] counts them; no count: a session summarized before it was kept, taken as it is), then
# counts it: of the queries that decided a summary of the same span, one stores it.
# KEYS: session, owner, count; ARGV: turn, ttl, summaries seen.
_APPEND_SUMMARY = """
local seen = tonumber(ARGV[3])
local count = redis.call('GET', KEYS[3])
if count and tonumber(count) ~= seen then return 0 end
local n = redis.call('STRLEN', KEYS[1])
if n <= 2 then return 0 end
redis.call('SETRANGE', KEYS[1], n - 1, ',' .. ARGV[1] .. ']')
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
redis.call('SET', KEYS[3], seen + 1, 'EX', ARGV[2])
return 1
"""

# Reads only what was appended since the caller's copy of ``known`` bytes: {length, text}, where
# text is "" (unchanged), the tail from the old closing ']' on, or the whole value. With a
# tenant in ARGV[2], a session KEYS[2] says another tenant owns answers {-1, ''}.
_LOAD = """
local n = redis.call('STRLEN', KEYS[1])
if n == 0 then return {0, ''} end
if ARGV[2] ~= '' and (redis.call('GET', KEYS[2]) or ARGV[3]) ~= ARGV[2] then return {-1, ''} end
local known = tonumber(ARGV[1])
if n == known then return {n, ''} end
if known > 2 and n > known then return {n, redis.call('GETRANGE', KEYS[1], known - 1, -1)} end
return {n, redis.call('GET', KEYS[1])}
"""

# Deletes the session (its owner key, its summary count) unless ARGV[1] names a tenant that does not own it.
_DELETE = """
if ARGV[1] ~= '' and (redis.call('GET', KEYS[2]) or ARGV[2]) ~= ARGV[1] then return 0 end
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2], KEYS[3])
return n
"""

# Deletes the lock only if it still holds the caller's token (it may have expired and been taken).
_UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_LOCK_POLL_SECONDS = 0.05

CHECK_FRESH_SECONDS = 1.0
"""How recent a Redis answer to a load or append may be for a query to skip its own ``PING``
(:meth:`SessionStore.check`): under load every query appends, so the pings vanish; an idle
master, or one whose last store command failed, pings again. A skipped ``PING`` still checks the
appends' connection (locally): a Redis that stopped since its last answer is noticed before the
query asks the LLM or runs a tool."""

_CACHED_SESSIONS = 512
"""Sessions whose parsed turns a master keeps, so a long session is not re-read and re-parsed per query."""
SESSION_CACHE_BYTES = 32 * 1024 * 1024
"""Bytes of stored JSON those sessions may add up to (their parsed form takes a few times more)."""


class _Step:
    """:meth:`SessionStore._step`: its deadline, and its errors as :class:`SessionStoreUnavailable`.
    A class, not an ``@asynccontextmanager`` generator: every query's append enters one."""

    __slots__ = ("_deadline", "_store")

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self._deadline = asyncio.timeout(store._timeout)

    async def __aenter__(self) -> None:
        await self._deadline.__aenter__()

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        try:
            await self._deadline.__aexit__(kind, exc, tb)  # the deadline passed: TimeoutError
        except TimeoutError as expired:
            raise self._store._unavailable(expired) or expired from expired
        if exc is not None and (unavailable := self._store._unavailable(exc)) is not None:
            raise unavailable from exc


class SessionStore(TenantRecords):
    """Load and append conversation turns.

    Sessions only ever grow (turns are appended, never rewritten), so the store keeps the
    parsed turns of recently used sessions and, on the next load, reads and parses only the
    bytes appended since: one round trip, whatever the session's length.
    """

    def __init__(
        self, redis: aioredis.Redis, *, ttl_seconds: int, timeout_seconds: float | None = None
    ) -> None:
        self._redis = redis
        self._ttl = ttl_seconds
        self._timeout = timeout_seconds
        """The deadline of one step (:meth:`check`, :meth:`load`, :meth:`append`): connecting, the
        command and the client's one retry together (``REDIS_QUERY_TIMEOUT_SECONDS``); ``None``: the
        client's own socket timeouts only."""
        self._append = redis.register_script(_APPEND)
        self._append_summary = redis.register_script(_APPEND_SUMMARY)
        self._appends = GroupCommit(redis)
        """Concurrent queries' appends go out as one pipeline (each still waits for its own answer)."""
        self._load = redis.register_script(_LOAD)
        self._delete = redis.register_script(_DELETE)
        self._cache: SizedLRU[str, TurnLog] = SizedLRU(
            SESSION_CACHE_BYTES, lambda _, log: log.length, max_entries=_CACHED_SESSIONS
        )
        self._unlock = redis.register_script(_UNLOCK)
        self._local_locks: dict[str, asyncio.Lock] = {}
        self._answered_at = float("-inf")
        """When Redis last answered a load, an append or a ping (``time.monotonic``); reset on failure."""

    def _step(self) -> _Step:
        """One store step within the deadline: Redis's errors, and its silence past the deadline
        (a hung Redis accepts connections but never answers), raise :class:`SessionStoreUnavailable`
        and make the next :meth:`check` ask Redis again."""
        return _Step(self)

    def _unavailable(self, exc: BaseException) -> SessionStoreUnavailable | None:
        """What a step that ended with ``exc`` raises instead (``None``: ``exc`` itself)."""
        if isinstance(exc, RedisError):
            self._answered_at = float("-inf")
            return SessionStoreUnavailable(f"session store unavailable (Redis): {exc}")
        if isinstance(exc, TimeoutError):
            self._answered_at = float("-inf")
            return SessionStoreUnavailable(
                f"session store unavailable (Redis): no answer within {self._timeout:g} s "
                "(REDIS_QUERY_TIMEOUT_SECONDS)"
            )
        return None

    @staticmethod
    def new_session_id() -> str:
        return str(uuid.uuid4())

    async def check(self, *, fresh_within: float = 0.0) -> None:
        """Raise :class:`SessionStoreUnavailable` unless Redis answers (before a query has side effects).

        With ``fresh_within`` (seconds), a load or append that Redis answered that recently stands
        for the ``PING`` (a query in a new session passes :data:`CHECK_FRESH_SECONDS`), provided
        the appends' connection is still open (checked locally, see
        :meth:`GroupCommit.open`): a recent answer alone proves nothing about a Redis that
        stopped since, whose end of that socket is then closed.
        """
        if fresh_within > 0 and time.monotonic() - self._answered_at < fresh_within and self._appends.open():
            return
        async with self._step():
            await self._redis.ping()
        self._answered_at = time.monotonic()

    async def load(self, session_id: str, scope: Scope) -> list[Turn] | None:
        """The session's turns, or ``None`` when it does not exist (or expired), or when
        ``scope`` does not see it (another tenant's)."""
        tenant = self._scoped("load", scope).tenant
        cached = self._cache.get(session_id)
        known = cached.length if cached else 0
        key = session_key(session_id)
        async with self._step():
            length, text = await self._load(
                keys=[key, session_owner_key(session_id)],
                args=[known, tenant or "", DEFAULT_TENANT],
            )
            if length == -1:  # another tenant's: as if it did not exist
                self._answered_at = time.monotonic()
                return None
            if length == 0:
                self._answered_at = time.monotonic()
                self._cache.pop(session_id)
                return None
            log = merge_log(cached, known, int(length), text)
            if log is None:  # not the value the cached copy was read from: read it whole
                text = cast(str, await self._redis.get(key)) or "[]"
                try:
                    log = TurnLog(parse_turns(text), len(text.encode()))
                except ValueError as exc:  # written by something else: left as it is
                    raise SessionStoreUnavailable(
                        f"session {session_id!r} is stored in Redis as something other than its turns "
                        f"({exc}); DELETE /sessions/{session_id} forgets it, or omit session_id to "
                        "start a new session"
                    ) from None
        self._answered_at = time.monotonic()
        self._cache.put(session_id, log)
        return SessionTurns(log)

    async def append(
        self,
        session_id: str,
        turns: Sequence[Turn],
        *,
        settled_calls: Sequence[str] = (),
        owner: str | None = None,
        also_set: tuple[str, str, int] | None = None,
    ) -> None:
        """Append ``turns`` atomically and refresh the session's TTL.

        ``settled_calls``: the ids of the HTTP invocation calls whose outcome ``turns`` store; their
        records end in the same script (a late callback is then refused, not stored twice).
        ``owner``: the tenant that owns the session when this append creates it (``None`` or
        ``default``: nothing is recorded, the session is ``default``'s).
        ``also_set``: ``(key, value, ttl)`` set in the same script (a run's record as it ends).
        """
        if not turns:
            return
        payload = b",".join(map(dump_json, turns))
        keys = [
            session_key(session_id),
            session_owner_key(session_id),
            session_summaries_key(session_id),
            *(call_record_key(call_id) for call_id in settled_calls),
        ]
        recorded = owner if owner is not None and owner != DEFAULT_TENANT else ""
        args: list[Any] = [payload, self._ttl, recorded]
        if also_set is not None:
            keys.append(also_set[0])
            args += [also_set[1], also_set[2]]
        async with self._step():
            await self._appends.run(self._append, keys, args)
        self._answered_at = time.monotonic()

    async def append_summary(self, session_id: str, turn: Turn, seen: int) -> bool:
        """Append the summary ``turn`` of a query that saw ``seen`` summary turns in the session,
        unless another summary was stored since (False: this one is not stored). The summary lock
        makes that rare; this makes it impossible (at most one summary per span), whatever the
        interleaving: a lock lost to its TTL, a reload that raced an append, several masters."""
        keys = [session_key(session_id), session_owner_key(session_id), session_summaries_key(session_id)]
        async with self._step():
            stored = await self._append_summary(keys=keys, args=[dump_json(turn), self._ttl, seen])
        self._answered_at = time.monotonic()
        return bool(stored)

    @asynccontextmanager
    async def summary_lock(self, session_id: str) -> AsyncIterator[None]:
        """Hold the session's summary lock: one summarization per session at a time, across masters.

        Queries of this master queue on an in-process lock; across masters, ``summary_lock:{id}``
        (SET NX with a TTL) is polled until free or expired. Whoever gets the lock next reloads
        the session and finds the summary the previous holder stored.
        """
        local = self._local_locks.setdefault(session_id, asyncio.Lock())
        try:
            async with local:
                token = uuid.uuid4().hex
                key = summary_lock_key(session_id)
                try:
                    async with asyncio.timeout(SUMMARY_LOCK_SECONDS):
                        while True:  # another master holds it: Redis has no wake-up to wait on
                            if await self._redis.set(key, token, nx=True, ex=SUMMARY_LOCK_SECONDS):
                                break
                            await asyncio.sleep(_LOCK_POLL_SECONDS)
                except TimeoutError:
                    pass  # a holder that never let go: go on (at worst, one more summary)
                except RedisError as exc:
                    raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
                try:
                    yield
                finally:
                    try:
                        await self._unlock(keys=[key], args=[token])
                    except RedisError:
                        pass  # it expires
        finally:
            if not local.locked() and self._local_locks.get(session_id) is local:
                del self._local_locks[session_id]

    async def claim_plan(self, session_id: str, plan_id: str, query_id: str) -> bool:
        """Claim the execution of a plan atomically: True for exactly one caller, ever (per TTL)."""
        try:
            claimed = await self._redis.set(
                plan_claim_key(session_id, plan_id), query_id, nx=True, ex=self._ttl
            )
        except RedisError as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        return bool(claimed)

    async def pause(
        self, session_id: str, state: dict[str, Any], call_ids: Sequence[str], *, ttl: int | None = None
    ) -> None:
        """Keep the state of the session's run that waits for the results of ``call_ids`` (from its
        asker), and which session each call belongs to; both expire with the session, or after
        ``ttl`` seconds when given (a run waiting for approvals)."""
        payload = json.dumps(state, separators=(",", ":"), default=str)
        ex = ttl if ttl is not None else self._ttl
        async with self._step():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.set(paused_run_key(session_id), payload, ex=ex)
                for call_id in call_ids:
                    pipe.set(paused_call_key(call_id), session_id, ex=ex)
                await pipe.execute()
        self._answered_at = time.monotonic()

    async def paused(self, session_id: str) -> dict[str, Any] | None:
        """The state of the session's paused run, or ``None``."""
        async with self._step():
            raw = await self._redis.get(paused_run_key(session_id))
        return _state(raw)

    async def take_paused(self, session_id: str) -> dict[str, Any] | None:
        """Take the paused run's state (GETDEL): of concurrent continuations, exactly one gets it."""
        async with self._step():
            raw = await self._redis.getdel(paused_run_key(session_id))
        return _state(raw)

    async def paused_session(self, call_id: str) -> str | None:
        """The session whose paused run waits for the result of ``call_id``, if any."""
        async with self._step():
            found = await self._redis.get(paused_call_key(call_id))
        return found.decode() if isinstance(found, bytes) else found

    async def owner(self, session_id: str) -> str:
        """The tenant that owns the session (``default`` when none is recorded, or it is unknown)."""
        async with self._step():
            found = await self._redis.get(session_owner_key(session_id))
        if isinstance(found, bytes):
            found = found.decode()
        return str(found) if found else DEFAULT_TENANT

    async def taken(self, session_id: str) -> bool:
        """Whether any session (of any tenant) has this id, or had it and its owner is still kept."""
        async with self._step():
            found = await self._redis.exists(session_key(session_id), session_owner_key(session_id))
        return bool(found)

    async def visible(self, session_id: str, scope: Scope) -> bool:
        """Whether ``scope`` sees the session's records (its attachments, approvals,
        collaborations); no round trip for every tenant's scope."""
        if self._scoped("visible", scope).every_tenant:
            return True
        return scope.sees(await self.owner(session_id))

    async def delete(self, session_id: str, scope: Scope) -> bool:
        """Forget a session; True when it existed and ``scope`` sees it."""
        tenant = self._scoped("delete", scope).tenant
        try:
            deleted = await self._delete(
                keys=[
                    session_key(session_id),
                    session_owner_key(session_id),
                    session_summaries_key(session_id),
                ],
                args=[tenant or "", DEFAULT_TENANT],
            )
        except RedisError as exc:
            raise SessionStoreUnavailable(f"session store unavailable (Redis): {exc}") from exc
        if deleted:
            self._cache.pop(session_id)
        return bool(deleted)
