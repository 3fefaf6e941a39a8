"""Attachment blobs in Redis under the session, content-addressed.

A file attached twice in a session (even under another name) is stored once: the
blob key is the content's SHA-256, and the ref the model sees is derived from it.
Blobs, the file list and the indexing state follow the session's TTL, refreshed by
every query of the session. The RAG agents read blobs with a token issued per query
(:meth:`AttachmentStore.issue_token`), which opens that session's blobs only. A session holds
at most ``session_max_bytes`` of distinct content (``OPENAGENT_SESSION_ATTACHMENT_MAX_BYTES``):
a query that would pass it is refused (``attachment_too_large``, 413) and stores nothing.

A session's files belong to the tenant of the query that attached them (a ``~tenant`` field of
the file list, for tenants other than ``default``): the reads take the asker's
:class:`~master.auth.Scope`, and another tenant's files are not there for it.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from master.attachments.files import NewFile
from master.auth import DEFAULT_TENANT, Scope, TenantRecords
from master.errors import (
    AttachmentAccessDenied,
    AttachmentNotFound,
    QueryRejected,
    SessionStoreUnavailable,
)
from master.storage.redis_keys import (
    attachment_blob_key,
    attachment_files_key,
    attachment_rag_key,
    attachment_token_key,
)


@dataclass(frozen=True, slots=True)
class StoredAttachment:
    """One file of a session, as listed in prompts and in ``GET /query/session-rag-context``."""

    ref: str
    filename: str
    mime_type: str
    size: int
    sha256: str
    attached_at: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_OWNER_FIELD = "~tenant"
"""The file list's field naming its tenant (no ref starts with ``~``)."""


class AttachmentStore(TenantRecords):
    """Session attachments, their tokens and their indexing state, in the master's Redis."""

    def __init__(
        self, redis: aioredis.Redis, *, ttl_seconds: int, session_max_bytes: int | None = None
    ) -> None:
        self._redis = redis
        self.ttl_seconds = ttl_seconds
        self.session_max_bytes = session_max_bytes

    async def save(self, session_id: str, files: list[NewFile], *, owner: str) -> list[StoredAttachment]:
        """Store ``files`` (each content once) for ``owner`` (the session's tenant) and return them
        as stored; one transaction.

        Raises ``QueryRejected('attachment_too_large')`` naming the cap when the session's
        distinct content would pass ``session_max_bytes`` (nothing is stored then).
        """
        stored: list[StoredAttachment] = []
        known = {item.ref: item for item in (await self._files(session_id))[1]}
        self._check_cap(known, files)
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                for file in files:
                    previous = known.get(file.ref)
                    entry = previous or StoredAttachment(
                        file.ref,
                        file.filename,
                        file.mime_type,
                        len(file.data),
                        file.sha256,
                        round(time.time(), 3),
                    )
                    stored.append(entry)
                    if previous is None:
                        known[file.ref] = entry
                        pipe.hset(attachment_files_key(session_id), file.ref, json.dumps(entry.as_dict()))
                        pipe.set(attachment_blob_key(session_id, file.sha256), file.data, ex=self.ttl_seconds)
                if owner != DEFAULT_TENANT:
                    pipe.hsetnx(attachment_files_key(session_id), _OWNER_FIELD, owner)
                pipe.expire(attachment_files_key(session_id), self.ttl_seconds)
                await pipe.execute()
        except RedisError as exc:
            raise SessionStoreUnavailable(f"could not store attachments: {exc}") from exc
        return stored

    def _check_cap(self, known: dict[str, StoredAttachment], files: list[NewFile]) -> None:
        if self.session_max_bytes is None:
            return
        held = {item.sha256: item.size for item in known.values()}
        added = {file.sha256: len(file.data) for file in files if file.sha256 not in held}
        total = sum(held.values()) + sum(added.values())
        if added and total > self.session_max_bytes:
            raise QueryRejected(
                "attachment_too_large",
                f"the session's attachments would total {total} bytes ({sum(held.values())} already "
                f"stored); the limit is {self.session_max_bytes} bytes per session "
                "(OPENAGENT_SESSION_ATTACHMENT_MAX_BYTES): start a new session",
            )

    async def files(self, session_id: str, scope: Scope) -> list[StoredAttachment]:
        """The session's files, oldest first (none when ``scope`` does not see them)."""
        self._scoped("files", scope)
        owner, items = await self._files(session_id)
        return items if scope.sees(owner) else []

    async def _files(self, session_id: str) -> tuple[str | None, list[StoredAttachment]]:
        """The tenant of the session's files (``None``: ``default``) and the files, oldest first."""
        try:
            raw = await self._redis.hgetall(attachment_files_key(session_id))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"could not read attachments: {exc}") from exc
        owner: str | None = None
        items: list[StoredAttachment] = []
        for key, value in raw.items():
            name = key.decode() if isinstance(key, bytes) else str(key)
            if name == _OWNER_FIELD:
                owner = value.decode() if isinstance(value, bytes) else str(value)
            else:
                items.append(StoredAttachment(**json.loads(value)))
        return owner, sorted(items, key=lambda item: (item.attached_at, item.ref))

    async def touch(self, session_id: str, attachments: list[StoredAttachment]) -> None:
        """Keep the session's files alive as long as the session (called by each query)."""
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.expire(attachment_files_key(session_id), self.ttl_seconds)
                pipe.expire(attachment_rag_key(session_id), self.ttl_seconds)
                for item in attachments:
                    pipe.expire(attachment_blob_key(session_id, item.sha256), self.ttl_seconds)
                await pipe.execute()
        except RedisError as exc:
            raise SessionStoreUnavailable(f"could not refresh attachments: {exc}") from exc

    async def blob(self, token: str, ref: str) -> tuple[StoredAttachment, bytes]:
        """The file ``ref`` of the token's session. Raises ``AttachmentAccessDenied`` or ``AttachmentNotFound``."""
        try:
            session_id = await self._redis.get(attachment_token_key(token)) if token else None
            if session_id is None:
                raise AttachmentAccessDenied("invalid or expired call token")
            session = session_id.decode() if isinstance(session_id, bytes) else str(session_id)
            raw = await self._redis.hget(attachment_files_key(session), ref) if ref != _OWNER_FIELD else None
            if raw is None:
                raise AttachmentNotFound(f"no attachment {ref!r} in this session")
            item = StoredAttachment(**json.loads(raw))
            data = await self._redis.get(attachment_blob_key(session, item.sha256))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"could not read attachment {ref!r}: {exc}") from exc
        if data is None:
            raise AttachmentNotFound(f"attachment {ref!r} expired")
        return item, data if isinstance(data, bytes) else str(data).encode()

    async def issue_token(self, session_id: str, ttl_seconds: int) -> str:
        """A token that opens the session's blobs until :meth:`revoke` (or ``ttl_seconds``)."""
        token = secrets.token_urlsafe(24)
        try:
            await self._redis.set(attachment_token_key(token), session_id, ex=max(1, ttl_seconds))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"could not issue an attachment token: {exc}") from exc
        return token

    async def revoke(self, token: str) -> None:
        try:
            await self._redis.delete(attachment_token_key(token))
        except RedisError:
            pass  # it expires on its own

    async def record_index(self, session_id: str, states: dict[str, dict[str, Any]]) -> None:
        """Remember what the indexer reported per ref (chunks, embedding model, when)."""
        if not states:
            return
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.hset(
                    attachment_rag_key(session_id),
                    mapping={ref: json.dumps(state) for ref, state in states.items()},
                )
                pipe.expire(attachment_rag_key(session_id), self.ttl_seconds)
                await pipe.execute()
        except RedisError as exc:
            raise SessionStoreUnavailable(f"could not record indexing state: {exc}") from exc

    async def index_states(self, session_id: str, scope: Scope) -> dict[str, dict[str, Any]]:
        """What the indexer reported per ref (none when ``scope`` does not see the session's files)."""
        self._scoped("index_states", scope)
        owner, _ = await self._files(session_id)
        if not scope.sees(owner):
            return {}
        try:
            raw = await self._redis.hgetall(attachment_rag_key(session_id))
        except RedisError as exc:
            raise SessionStoreUnavailable(f"could not read indexing state: {exc}") from exc
        return {
            (key.decode() if isinstance(key, bytes) else str(key)): json.loads(value)
            for key, value in raw.items()
        }
