"""Who holds each agent id: :class:`AgentIds`, the one place an id is claimed or released.

Every way an agent id is taken goes through :meth:`AgentIds.claim`: the WebSocket ``register``
(action agents and query clients, and the legacy ``invocation_url``), ``POST /register`` (HTTP
invocation agents, MCP servers, A2A agents), a restored workspace, and, through ``/ws``, YAML
agents and sandboxed agents. ``POST /unregister`` goes through :meth:`AgentIds.check_release`
before it removes the agent and :meth:`AgentIds.release` once it removed one. No
caller compares owners itself: :func:`refusal` and :func:`release_refusal` are the rules.

The rules:

- an ``agent`` key takes only the ids its ``agent_ids`` patterns match (an administrator any);
- an id belongs to the tenant that first registered it; another tenant's key cannot take it
  (``agent_conflict``) nor release it (``not_found``: it is not there for that tenant);
- an administrator's shared registration (for every tenant: no ``?tenant=``) is changed or
  released by an administrator only; one an administrator made for a tenant is that tenant's;
- a query client never takes an action agent's id (``agent_conflict``), and an action agent
  outranks a query client of its own tenant (an administrator's any): query clients' ids are
  theirs only while they are connected, and another tenant's agent cannot take them.

Owners live in Redis (``agent_owner:{id}``, :mod:`master.storage.redis_keys`), so the rules hold across
every master sharing it; a claim is decided and written in one optimistic transaction (``WATCH``),
so two registrations racing for a free id cannot both win. An owner record expires
``REDIS_AGENT_TTL_SECONDS`` after its last registration, or after its WebSocket agent last
disconnected (:meth:`AgentIds.leave` writes it again); an agent still known then (connected here
or to another master, or stored for HTTP invocation) keeps its id through ``known``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError, WatchError

from master.access.permissions import agent_id_refused, may_act_as
from master.auth import Principal
from master.errors import RegistrationRefused, SessionStoreUnavailable
from master.storage.redis_keys import agent_owner_key
from protocol import ErrorCode

logger = logging.getLogger("master.agents.identity")

IdRole = Literal["action", "query"]
"""What holds an id: an action agent (tools, an HTTP or remote agent) or a query client."""

_ATTEMPTS = 8
"""Optimistic transactions tried before a claim racing other claims of the same id gives up."""

# Puts back ARGV[2] (or deletes, when it is empty) only while KEYS[1] still holds ARGV[1].
_RESTORE_IF_SAME = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if ARGV[2] == '' then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  end
  return 1
end
return 0
"""

# Writes ARGV[1] with a TTL of ARGV[2] seconds while KEYS[1] holds it or nothing (an action agent
# left: its id stays its owner's for the TTL from now, unless someone claimed it since).
_HOLD_FROM_NOW = """
local current = redis.call('GET', KEYS[1])
if current == false or current == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
  return 1
end
return 0
"""


@dataclass(frozen=True, slots=True)
class Owner:
    """Who holds an agent id."""

    tenant: str | None
    """The tenant whose queries the agent serves (``None``: shared with every tenant, which only
    an administrator registers, changes or releases)."""
    role: IdRole

    def record(self) -> str:
        return json.dumps({"tenant": self.tenant, "role": self.role}, separators=(",", ":"))

    @classmethod
    def parse(cls, raw: str | bytes) -> Owner | None:
        """The owner in ``raw``, or ``None`` when the record is unusable (it then holds nothing)."""
        try:
            data = json.loads(raw)
            tenant = data["tenant"]
            role = data["role"]
            if (tenant is not None and not isinstance(tenant, str)) or role not in ("action", "query"):
                return None
            return cls(tenant, role)
        except (ValueError, TypeError, KeyError):
            return None

    @classmethod
    def of_agent(cls, tenant: str | None, role: str) -> Owner:
        """The owner of an agent known without a record."""
        return cls(tenant, "query" if role == "query" else "action")


KnownOwner = Callable[[str], Owner | None]
"""The owner of an id as the agents known right now show it (the agent directory), when no
record says (one that expired while its agent lived on, or an agent registered before records)."""


def refusal(
    owner: Owner | None, principal: Principal, agent_id: str, role: IdRole
) -> RegistrationRefused | None:
    """Why ``principal`` may not claim ``agent_id`` for an agent of ``role``, held by ``owner``."""
    if role == "action" and not may_act_as(principal, agent_id):
        return RegistrationRefused(ErrorCode.FORBIDDEN, agent_id_refused(principal, agent_id))
    if owner is None:
        return None
    if role == "query" and owner.role == "action":
        return RegistrationRefused(
            ErrorCode.AGENT_CONFLICT,
            f"agent id {agent_id!r} is an action agent's: a query client registers under an id of its own",
        )
    if principal.is_admin:
        return None  # an administrator decides
    if (
        role == "action"
        and owner.role == "query"
        and owner.tenant is not None
        and owner.tenant == principal.tenant
    ):
        return None  # an agent outranks a query client of its own tenant
    if owner.tenant is None:
        return RegistrationRefused(
            ErrorCode.AGENT_CONFLICT,
            f"agent id {agent_id!r} is shared with every tenant by an administrator: "
            "only an administrator may change it",
        )
    if owner.tenant != principal.tenant:
        return RegistrationRefused(ErrorCode.AGENT_CONFLICT, f"agent id {agent_id!r} is another tenant's")
    return None


def release_refusal(owner: Owner | None, principal: Principal, agent_id: str) -> RegistrationRefused | None:
    """Why ``principal`` may not release ``agent_id``, held by ``owner`` (another tenant's id is
    ``not_found``: it does not exist for that tenant)."""
    if not may_act_as(principal, agent_id):
        return RegistrationRefused(ErrorCode.FORBIDDEN, agent_id_refused(principal, agent_id))
    if owner is None or principal.is_admin:
        return None
    if owner.tenant is None:
        return RegistrationRefused(
            ErrorCode.FORBIDDEN,
            f"agent {agent_id!r} is shared with every tenant by an administrator: "
            "only an administrator may unregister it",
        )
    if owner.tenant != principal.tenant:
        return RegistrationRefused(ErrorCode.NOT_FOUND, f"unknown agent {agent_id!r}")
    return None


@dataclass(frozen=True, slots=True)
class Claim:
    """A claim written by :meth:`AgentIds.claim`; :meth:`AgentIds.undo` puts back what it replaced
    (the registration it was for failed: nothing is kept of a refused request)."""

    agent_id: str
    owner: Owner
    written: str
    previous: str | None


class AgentIds:
    """The owners of agent ids, in Redis (module docstring: the rules)."""

    def __init__(self, redis: aioredis.Redis, *, ttl_seconds: int, known: KnownOwner | None = None) -> None:
        self._redis = redis
        self._ttl = ttl_seconds
        self._known = known
        self._script: AsyncScript | None = None
        self._hold: AsyncScript | None = None

    async def _restore_if_same(self, agent_id: str, expected: str, restored: str) -> None:
        """Set the owner record of ``agent_id`` back to ``restored`` (empty: delete it) while it
        still holds ``expected``."""
        if self._script is None:
            self._script = self._redis.register_script(_RESTORE_IF_SAME)
        await self._script(keys=[agent_owner_key(agent_id)], args=[expected, restored])

    def _owner(self, agent_id: str, raw: str | bytes | None) -> Owner | None:
        owner = Owner.parse(raw) if raw is not None else None
        if owner is None and self._known is not None:
            owner = self._known(agent_id)
        return owner

    async def owner(self, agent_id: str) -> Owner | None:
        """Who holds ``agent_id`` now (``None``: nobody)."""
        try:
            raw = await self._redis.get(agent_owner_key(agent_id))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"agent id store unavailable (Redis): {exc}") from exc
        return self._owner(agent_id, raw)

    async def check(self, principal: Principal, agent_id: str, role: IdRole, *, tenant: str | None) -> None:
        """Raise the :class:`RegistrationRefused` that :meth:`claim` would, writing nothing (a
        registration that must ask a remote agent first refuses early)."""
        found = refusal(await self.owner(agent_id), principal, agent_id, role)
        if found is not None:
            raise found

    async def claim(self, principal: Principal, agent_id: str, role: IdRole, *, tenant: str | None) -> Claim:
        """Take ``agent_id`` for ``principal``'s agent of ``role``, serving ``tenant`` (``None``:
        every tenant; only an administrator's registration may be shared). Raises
        :class:`RegistrationRefused` (``forbidden``: the key's patterns; ``agent_conflict``: the
        id is held) and :class:`SessionStoreUnavailable`."""
        wanted = Owner(tenant, role)
        written = wanted.record()
        key = agent_owner_key(agent_id)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                for _ in range(_ATTEMPTS):
                    try:
                        await pipe.watch(key)
                        raw = await pipe.get(key)
                        found = refusal(self._owner(agent_id, raw), principal, agent_id, role)
                        if found is not None:
                            raise found
                        pipe.multi()  # type: ignore[no-untyped-call]
                        pipe.set(key, written, ex=self._ttl)
                        await pipe.execute()
                    except WatchError:
                        continue
                    previous = raw.decode() if isinstance(raw, bytes) else raw
                    return Claim(agent_id, wanted, written, previous)
        except RedisError as exc:
            if not principal.is_admin:  # fails closed: a tenant's claim needs the record
                raise SessionStoreUnavailable(f"agent id store unavailable (Redis): {exc}") from exc
            # An administrator may hold any id: its agent joins this master with Redis down (as
            # agents always could), judged against the agents this master knows; nothing is kept.
            found = refusal(self._owner(agent_id, None), principal, agent_id, role)
            if found is not None:
                raise found from None
            logger.warning("agent id %s claimed without its record: Redis is unavailable (%s)", agent_id, exc)
            return Claim(agent_id, wanted, written, None)
        raise RegistrationRefused(
            ErrorCode.AGENT_CONFLICT, f"agent id {agent_id!r} is being registered by others: try again"
        )

    async def undo(self, claim: Claim) -> None:
        """Put back what ``claim`` replaced, unless someone claimed the id since (best effort)."""
        try:
            await self._restore_if_same(claim.agent_id, claim.written, claim.previous or "")
        except RedisError as exc:
            logger.warning("could not undo the claim of agent id %s: %s", claim.agent_id, exc)

    async def check_release(self, principal: Principal, agent_id: str) -> None:
        """Raise the :class:`RegistrationRefused` that :meth:`release` would, changing nothing
        (``POST /unregister`` refuses before it removes anything, and releases the id only once
        it removed an agent)."""
        found = release_refusal(await self.owner(agent_id), principal, agent_id)
        if found is not None:
            raise found

    async def release(self, principal: Principal, agent_id: str) -> Owner | None:
        """Give ``agent_id`` up (``POST /unregister``, once its agent is removed): returns who
        held it. Raises :class:`RegistrationRefused` (``forbidden``, ``not_found``) and
        :class:`SessionStoreUnavailable`."""
        key = agent_owner_key(agent_id)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                for _ in range(_ATTEMPTS):
                    try:
                        await pipe.watch(key)
                        raw = await pipe.get(key)
                        owner = self._owner(agent_id, raw)
                        found = release_refusal(owner, principal, agent_id)
                        if found is not None:
                            raise found
                        pipe.multi()  # type: ignore[no-untyped-call]
                        pipe.delete(key)
                        await pipe.execute()
                    except WatchError:
                        continue
                    return owner
        except RedisError as exc:
            raise SessionStoreUnavailable(f"agent id store unavailable (Redis): {exc}") from exc
        raise RegistrationRefused(
            ErrorCode.AGENT_CONFLICT, f"agent id {agent_id!r} is being registered by others: try again"
        )

    async def leave(self, claim: Claim) -> None:
        """An agent disconnected. A query client's id is free again (unless someone claimed it
        since). An action agent's id stays its owner's, for ``REDIS_AGENT_TTL_SECONDS`` from now
        (its record is written again with the TTL: while it was connected, the record written at
        its claim may have expired), so its reconnection finds it and no other tenant takes it."""
        try:
            if claim.owner.role == "query":
                await self._restore_if_same(claim.agent_id, claim.written, "")
                return
            if self._hold is None:
                self._hold = self._redis.register_script(_HOLD_FROM_NOW)
            await self._hold(keys=[agent_owner_key(claim.agent_id)], args=[claim.written, self._ttl])
        except RedisError as exc:
            logger.warning("could not keep the owner of agent id %s after it left: %s", claim.agent_id, exc)
