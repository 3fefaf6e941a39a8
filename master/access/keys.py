"""Stored API keys: :class:`KeyStore` creates, looks up, lists and revokes them in Redis.

A key is ``oak_`` and 43 URL-safe characters (32 random bytes). Redis holds only the key's
SHA-256 (:func:`digest_of`), as the field of one hash, with the key's record as its value; the
secret exists only in the answer to ``POST /keys``.

Why a plain SHA-256 and not a password hash (bcrypt, scrypt, Argon2): those are slow on
purpose, to make guessing a *low-entropy* password from a stolen hash expensive. A key here is
256 random bits: no guess list exists, so one fast hash is as safe, and it keeps the look-up of
every request that presents a stored key at a few microseconds of CPU.

Every request with a stored key looks it up in Redis (one ``HGET``), rather than in a cache in
this process: revocation is then effective on every master at the moment ``DELETE /keys/{id}``
answers, with no pub/sub message that could arrive late or be lost. The bootstrap key
(``OPENAGENT_API_KEY``) never reaches this module: it is compared in memory first.
``last_used`` is kept in memory (:meth:`KeyStore.touch`) and written in one ``HSET`` per flush
(:meth:`KeyStore.flush`, every :data:`FLUSH_SECONDS` by the lifespan and before each list), so
it adds no round trip to a request.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.access.permissions import ROLES_WITH, Permission
from master.auth import DEFAULT_TENANT, Principal, Role
from master.errors import SessionStoreUnavailable
from master.storage.redis_keys import API_KEYS, API_KEYS_LAST_USED

logger = logging.getLogger("master.access.keys")

KEY_PREFIX = "oak_"
"""Every stored key starts with it (secret scanners and the resolver tell it from a JWT)."""
FLUSH_SECONDS = 15.0
"""How often the lifespan writes the keys' ``last_used`` times."""


def may_decide_approvals(role: Role) -> bool:
    """Whether a key of ``role`` may decide approvals (it needs :attr:`Permission.QUERY`): only
    such a key's ``approves`` patterns count, and ``POST /keys`` refuses them on any other."""
    return role in ROLES_WITH[Permission.QUERY]


def digest_of(secret: str) -> str:
    """The SHA-256 of a key, hex (what Redis holds; module docstring: why not a slow hash)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredKey:
    """A key's record (never its secret)."""

    key_id: str
    name: str
    role: Role
    tenant: str
    agent_ids: tuple[str, ...]
    created: float
    last_used: float | None = None
    approves: tuple[str, ...] = ()
    """Patterns of the tools whose approvals the key decides (:attr:`Principal.approves`)."""

    def principal(self) -> Principal:
        return Principal(
            key_id=self.key_id,
            name=self.name,
            role=self.role,
            tenant=self.tenant,
            agent_ids=self.agent_ids,
            approves=self.approves,
        )

    def decides(self, tool: str) -> bool:
        """Whether an ``approves`` pattern matches ``tool`` (``fnmatch``, case-sensitive)."""
        return any(fnmatchcase(tool, pattern) for pattern in self.approves)

    def record(self) -> str:
        return json.dumps(
            {
                "key_id": self.key_id,
                "name": self.name,
                "role": self.role.value,
                "tenant": self.tenant,
                "agent_ids": list(self.agent_ids),
                "created": self.created,
                **({"approves": list(self.approves)} if self.approves else {}),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_record(cls, raw: str | bytes, last_used: float | None = None) -> StoredKey:
        data: dict[str, Any] = json.loads(raw)
        return cls(
            key_id=str(data["key_id"]),
            name=str(data["name"]),
            role=Role(data["role"]),
            tenant=str(data.get("tenant") or DEFAULT_TENANT),
            agent_ids=tuple(str(p) for p in data.get("agent_ids") or ()),
            created=float(data["created"]),
            last_used=last_used,
            approves=tuple(str(p) for p in data.get("approves") or ()),
        )


class KeyStore:
    """The stored keys in Redis (module docstring). Redis failures raise :class:`SessionStoreUnavailable`."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._used: dict[str, float] = {}
        """key_id → last use seen by this master, not written yet."""

    async def create(
        self,
        *,
        name: str,
        role: Role,
        tenant: str = DEFAULT_TENANT,
        agent_ids: Iterable[str] = (),
        approves: Iterable[str] = (),
    ) -> tuple[StoredKey, str]:
        """A new key: its record and its secret (shown once, never stored)."""
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        key = StoredKey(
            key_id="key_" + secrets.token_hex(8),
            name=name,
            role=role,
            tenant=tenant,
            agent_ids=tuple(agent_ids),
            created=time.time(),
            approves=tuple(approves),
        )
        try:
            await self._redis.hset(API_KEYS, digest_of(secret), key.record())
        except RedisError as exc:
            raise SessionStoreUnavailable(f"cannot store the key: Redis failed ({exc})") from exc
        return key, secret

    async def lookup(self, secret: str) -> StoredKey | None:
        """The key whose secret is ``secret`` (one ``HGET``), or ``None``; notes its use."""
        try:
            raw = await self._redis.hget(API_KEYS, digest_of(secret))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"cannot check the API key: Redis failed ({exc})") from exc
        if raw is None:
            return None
        key = StoredKey.from_record(raw)
        self.touch(key.key_id)
        return key

    def touch(self, key_id: str) -> None:
        """Note a use of ``key_id`` now (written by the next :meth:`flush`)."""
        self._used[key_id] = time.time()

    async def flush(self) -> None:
        """Write the uses noted since the last flush (one ``HSET``); kept for the next one on failure."""
        if not self._used:
            return
        used, self._used = self._used, {}
        try:
            await self._redis.hset(API_KEYS_LAST_USED, mapping={k: repr(v) for k, v in used.items()})
        except RedisError as exc:
            for key_id, at in used.items():
                self._used.setdefault(key_id, at)
            logger.warning("cannot record when keys were last used: Redis failed (%s)", exc)

    async def list(self) -> list[StoredKey]:
        """Every key, oldest first, with when it was last used (this master's uses flushed first)."""
        await self.flush()
        try:
            records = await self._redis.hgetall(API_KEYS)
            used = await self._redis.hgetall(API_KEYS_LAST_USED)
        except RedisError as exc:
            raise SessionStoreUnavailable(f"cannot list the keys: Redis failed ({exc})") from exc
        keys = []
        for raw in records.values():
            key = StoredKey.from_record(raw)
            at = used.get(key.key_id)
            keys.append(dataclasses.replace(key, last_used=float(at)) if at is not None else key)
        return sorted(keys, key=lambda k: (k.created, k.key_id))

    async def approvers(self, tenant: str, tool: str) -> Sequence[StoredKey]:
        """The keys of ``tenant`` that may decide approvals (:func:`may_decide_approvals`) and whose
        ``approves`` patterns match ``tool`` (``<agent_id>__<tool>``). A key that could not decide
        (a viewer's, an agent's) never locks its tenant's deciders out."""
        try:
            records = await self._redis.hvals(API_KEYS)
        except RedisError as exc:
            raise SessionStoreUnavailable(f"cannot read the keys: Redis failed ({exc})") from exc
        keys = (StoredKey.from_record(raw) for raw in records)
        return [
            key
            for key in keys
            if key.tenant == tenant and may_decide_approvals(key.role) and key.decides(tool)
        ]

    async def revoke(self, key_id: str) -> StoredKey | None:
        """Delete ``key_id`` (effective for every master's next request); ``None`` if unknown."""
        try:
            records = await self._redis.hgetall(API_KEYS)
            for digest, raw in records.items():
                key = StoredKey.from_record(raw)
                if key.key_id == key_id:
                    async with self._redis.pipeline(transaction=True) as pipe:
                        pipe.hdel(API_KEYS, digest)
                        pipe.hdel(API_KEYS_LAST_USED, key_id)
                        await pipe.execute()
                    self._used.pop(key_id, None)
                    return key
        except RedisError as exc:
            raise SessionStoreUnavailable(f"cannot revoke the key: Redis failed ({exc})") from exc
        return None
