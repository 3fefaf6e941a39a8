"""Where the indexer keeps chunks and vectors: Redis at its own ``REDIS_URL``.

Everything is scoped by session (the master's, never the model's choice) and by an
optional collection; every key of a session expires with the session's TTL, refreshed
on each write. Two ways to search, chosen by :func:`open_store`:

- :class:`BruteForceStore` (any Redis 7, no modules): a document's vectors are one
  packed float32 string; a search loads the session's vectors into a numpy matrix,
  cached in memory until the session's version counter moves, and takes the top
  scores of one matrix-vector product. Fast to about a few hundred thousand chunks
  per session (see the README's benchmark); above that use the query engine.
- :class:`QueryEngineStore` (Redis 8, Redis Stack: the query engine answers
  ``FT._LIST``): one hash per chunk with its vector, an HNSW cosine index per vector
  size, and ``FT.SEARCH ... KNN`` with the session as a tag filter.

Re-indexing a document replaces its chunks (keys are derived from the document id),
so a document indexed twice is stored once.

Key layout (``{s}`` session id, ``{d}`` ``collection/doc_id``)::

    openagent:rag:{s}:docs          HASH  {d} -> JSON document record
    openagent:rag:{s}:chunks:{d}    HASH  chunk index -> JSON chunk
    openagent:rag:{s}:vec:{d}       STRING packed float32 vectors (brute force)
    openagent:rag:{s}:version       INT   bumped by every write (brute-force cache key)
    openagent:rag:q{dim}:{s}:{d}:{i} HASH chunk with its vector (query engine)
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from openagent.rag.embeddings import Vectors
from protocol.rag import Chunk

__all__ = [
    "BruteForceStore",
    "DocumentRecord",
    "Hit",
    "QueryEngineStore",
    "SearchFilters",
    "VectorStore",
    "open_store",
    "query_engine_available",
]

logger = logging.getLogger("openagent.rag")

PREFIX = "openagent:rag:"


def docs_key(session_id: str) -> str:
    return f"{PREFIX}{session_id}:docs"


def chunks_key(session_id: str, doc_key: str) -> str:
    return f"{PREFIX}{session_id}:chunks:{doc_key}"


def vec_key(session_id: str, doc_key: str) -> str:
    return f"{PREFIX}{session_id}:vec:{doc_key}"


def version_key(session_id: str) -> str:
    return f"{PREFIX}{session_id}:version"


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    """One indexed document of a session."""

    doc_id: str
    collection: str
    filename: str
    ref: str | None
    chunks: int
    model: str
    dimensions: int
    fingerprint: str
    """Hash of the chunk texts and positions: the same fingerprint means nothing to re-index."""
    indexed_at: float

    @property
    def key(self) -> str:
        return f"{self.collection}/{self.doc_id}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> DocumentRecord:
        return cls(**json.loads(raw))


@dataclass(frozen=True, slots=True)
class SearchFilters:
    collection: str | None = None
    filenames: tuple[str, ...] = ()
    refs: tuple[str, ...] = ()

    def admits(self, record: DocumentRecord) -> bool:
        return (
            (self.collection is None or record.collection == self.collection)
            and (not self.filenames or record.filename in self.filenames)
            and (not self.refs or record.ref in self.refs)
        )


@dataclass(frozen=True, slots=True)
class Hit:
    filename: str
    ref: str | None
    collection: str
    position: str
    index: int
    score: float
    text: str


class VectorStore:
    """The document registry both search backends share; subclasses store and search vectors."""

    backend = "none"

    def __init__(self, client: aioredis.Redis) -> None:
        self._redis = client

    async def documents(self, session_id: str) -> list[DocumentRecord]:
        raw = await self._redis.hgetall(docs_key(session_id))
        return sorted((DocumentRecord.from_json(value) for value in raw.values()), key=lambda r: r.indexed_at)

    async def document(self, session_id: str, collection: str, doc_id: str) -> DocumentRecord | None:
        raw = await self._redis.hget(docs_key(session_id), f"{collection}/{doc_id}")
        return None if raw is None else DocumentRecord.from_json(raw)

    async def put(
        self, session_id: str, record: DocumentRecord, chunks: list[Chunk], vectors: Vectors, ttl: int
    ) -> None:
        """Store (or replace) a document's chunks and vectors."""
        raise NotImplementedError

    async def search(
        self, session_id: str, query: Vectors, *, model: str, top_k: int, filters: SearchFilters, ttl: int
    ) -> list[Hit]:
        raise NotImplementedError

    async def _chunk_texts(self, session_id: str, wanted: list[tuple[str, int]]) -> list[dict[str, Any]]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for doc_key, index in wanted:
                pipe.hget(chunks_key(session_id, doc_key), str(index))
            raw = await pipe.execute()
        return [json.loads(item) if item is not None else {} for item in raw]

    def _chunk_fields(self, chunks: list[Chunk]) -> dict[str, str]:
        return {
            str(chunk.index): json.dumps({"position": chunk.position, "text": chunk.text}, ensure_ascii=False)
            for chunk in chunks
        }


@dataclass(slots=True)
class _Matrix:
    version: int
    vectors: Vectors
    rows: list[tuple[DocumentRecord, int]]
    nbytes: int


class BruteForceStore(VectorStore):
    """Exact cosine search with numpy over the session's vectors (Redis 7, no modules)."""

    backend = "bruteforce"

    def __init__(self, client: aioredis.Redis, *, cache_bytes: int = 512 * 1024 * 1024) -> None:
        super().__init__(client)
        self._cache: OrderedDict[tuple[str, str], _Matrix] = OrderedDict()
        self._cache_bytes = cache_bytes
        self._touched: dict[str, float] = {}
        self.loads = 0
        """How many times a session's vectors were read from Redis (cache misses)."""

    async def put(
        self, session_id: str, record: DocumentRecord, chunks: list[Chunk], vectors: Vectors, ttl: int
    ) -> None:
        keys = [docs_key(session_id), chunks_key(session_id, record.key), vec_key(session_id, record.key)]
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(keys[0], record.key, record.to_json())
            pipe.delete(keys[1])
            pipe.hset(keys[1], mapping=self._chunk_fields(chunks))  # type: ignore[arg-type]
            pipe.set(keys[2], np.ascontiguousarray(vectors, dtype="<f4").tobytes())
            pipe.incr(version_key(session_id))
            for key in [*keys, version_key(session_id)]:
                pipe.expire(key, ttl)
            await pipe.execute()

    async def search(
        self, session_id: str, query: Vectors, *, model: str, top_k: int, filters: SearchFilters, ttl: int
    ) -> list[Hit]:
        matrix = await self._matrix(session_id, model)
        if matrix is None or not matrix.rows:
            return []
        scores = matrix.vectors @ query.astype(np.float32).reshape(-1)
        if filters != SearchFilters():
            mask = np.fromiter((filters.admits(record) for record, _ in matrix.rows), dtype=bool)
            scores = np.where(mask, scores, -np.inf)
        k = min(top_k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        best = [int(i) for i in top if np.isfinite(scores[i])]
        picked = [matrix.rows[i] for i in best]
        await self._touch(session_id, {record.key for record, _ in matrix.rows}, ttl)
        texts = await self._chunk_texts(session_id, [(record.key, index) for record, index in picked])
        return [
            Hit(
                filename=record.filename,
                ref=record.ref,
                collection=record.collection,
                position=str(text.get("position", "")),
                index=index,
                score=round(float(scores[i]), 4),
                text=str(text.get("text", "")),
            )
            for i, (record, index), text in zip(best, picked, texts, strict=True)
        ]

    async def _touch(self, session_id: str, doc_keys: set[str], ttl: int) -> None:
        """A search keeps the session's chunks alive as long as the session (at most once a minute)."""
        last = self._touched.get(session_id, 0.0)
        if time.monotonic() - last < 60:
            return
        self._touched[session_id] = time.monotonic()
        if len(self._touched) > 10000:
            self._touched.clear()
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in (docs_key(session_id), version_key(session_id)):
                pipe.expire(key, ttl)
            for doc_key in doc_keys:
                pipe.expire(chunks_key(session_id, doc_key), ttl)
                pipe.expire(vec_key(session_id, doc_key), ttl)
            await pipe.execute()

    async def _matrix(self, session_id: str, model: str) -> _Matrix | None:
        raw_version = await self._redis.get(version_key(session_id))
        if raw_version is None:
            return None
        version = int(raw_version)
        cache_key = (session_id, model)
        cached = self._cache.get(cache_key)
        if cached is not None and cached.version == version:
            self._cache.move_to_end(cache_key)
            return cached
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.get(version_key(session_id))
            pipe.hgetall(docs_key(session_id))
            raw_version, raw_docs = await pipe.execute()
        records = [DocumentRecord.from_json(value) for value in raw_docs.values()]
        records = sorted((r for r in records if r.model == model), key=lambda r: r.key)
        async with self._redis.pipeline(transaction=False) as pipe:
            for record in records:
                pipe.get(vec_key(session_id, record.key))
            blobs = await pipe.execute()
        parts: list[Vectors] = []
        rows: list[tuple[DocumentRecord, int]] = []
        for record, blob in zip(records, blobs, strict=True):
            if blob is None:
                continue
            vectors = np.frombuffer(blob, dtype="<f4").reshape(-1, record.dimensions)
            parts.append(vectors)
            rows.extend((record, index) for index in range(len(vectors)))
        stacked = np.vstack(parts).astype(np.float32) if parts else np.zeros((0, 1), dtype=np.float32)
        matrix = _Matrix(int(raw_version or 0), stacked, rows, stacked.nbytes + 200 * len(rows))
        self.loads += 1
        self._remember(cache_key, matrix)
        return matrix

    def _remember(self, cache_key: tuple[str, str], matrix: _Matrix) -> None:
        self._cache[cache_key] = matrix
        self._cache.move_to_end(cache_key)
        total = sum(item.nbytes for item in self._cache.values())
        while total > self._cache_bytes and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            total -= dropped.nbytes


async def _command(client: aioredis.Redis, *args: Any) -> Any:
    """``execute_command``, typed (redis-py leaves it untyped)."""
    return await client.execute_command(*args)  # type: ignore[no-untyped-call]


def _tag(value: str) -> str:
    """Escape a value for a TAG query (every non-alphanumeric character gets a backslash)."""
    return "".join(ch if ch.isalnum() else f"\\{ch}" for ch in value)


class QueryEngineStore(VectorStore):
    """Redis query engine (``FT.*``): an HNSW cosine index per vector size, session as a tag."""

    backend = "redis-query"

    def __init__(self, client: aioredis.Redis) -> None:
        super().__init__(client)
        self._indexes: set[int] = set()

    @staticmethod
    def chunk_prefix(dimensions: int) -> str:
        return f"{PREFIX}q{dimensions}:"

    async def _ensure_index(self, dimensions: int) -> str:
        name = f"openagent-rag-{dimensions}"
        if dimensions in self._indexes:
            return name
        try:
            await _command(self._redis, "FT.INFO", name)
        except ResponseError:
            await _command(
                self._redis,
                "FT.CREATE", name, "ON", "HASH", "PREFIX", "1", self.chunk_prefix(dimensions),
                "SCHEMA", "session", "TAG", "collection", "TAG", "filename", "TAG", "ref", "TAG",
                "model", "TAG", "vec", "VECTOR", "HNSW", "6", "TYPE", "FLOAT32", "DIM", str(dimensions),
                "DISTANCE_METRIC", "COSINE",
            )  # fmt: skip
        self._indexes.add(dimensions)
        return name

    def _chunk_key(self, session_id: str, record: DocumentRecord, index: int) -> str:
        return f"{self.chunk_prefix(record.dimensions)}{session_id}:{record.key}:{index}"

    async def put(
        self, session_id: str, record: DocumentRecord, chunks: list[Chunk], vectors: Vectors, ttl: int
    ) -> None:
        await self._ensure_index(record.dimensions)
        old = await self.document(session_id, record.collection, record.doc_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            if old is not None:
                for index in range(old.chunks):
                    pipe.delete(self._chunk_key(session_id, old, index))
            pipe.hset(docs_key(session_id), record.key, record.to_json())
            pipe.expire(docs_key(session_id), ttl)
            for chunk, vector in zip(chunks, vectors, strict=True):
                key = self._chunk_key(session_id, record, chunk.index)
                fields = {
                    "session": session_id,
                    "collection": record.collection,
                    "filename": record.filename,
                    "ref": record.ref or "",
                    "model": record.model,
                    "position": chunk.position,
                    "index": str(chunk.index),
                    "text": chunk.text,
                    "vec": np.ascontiguousarray(vector, dtype="<f4").tobytes(),
                }
                pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
                pipe.expire(key, ttl)
            await pipe.execute()

    async def search(
        self, session_id: str, query: Vectors, *, model: str, top_k: int, filters: SearchFilters, ttl: int
    ) -> list[Hit]:
        dims = int(query.reshape(-1).shape[0])
        name = await self._ensure_index(dims)
        clauses = [f"@session:{{{_tag(session_id)}}}", f"@model:{{{_tag(model)}}}"]
        if filters.collection:
            clauses.append(f"@collection:{{{_tag(filters.collection)}}}")
        if filters.filenames:
            clauses.append("@filename:{" + " | ".join(_tag(name) for name in filters.filenames) + "}")
        if filters.refs:
            clauses.append("@ref:{" + " | ".join(_tag(ref) for ref in filters.refs) + "}")
        expression = f"({' '.join(clauses)})=>[KNN {int(top_k)} @vec $q AS dist]"
        reply = await _command(
                self._redis,
            "FT.SEARCH", name, expression, "PARAMS", "2", "q", query.astype("<f4").tobytes(),
            "SORTBY", "dist", "ASC", "RETURN", "7", "filename", "ref", "collection", "position", "index",
            "text", "dist", "LIMIT", "0", str(int(top_k)), "DIALECT", "2",
        )  # fmt: skip
        return parse_search_reply(reply)


def parse_search_reply(reply: Any) -> list[Hit]:
    """Hits of an ``FT.SEARCH`` reply (RESP2: total, then key and field list pairs)."""
    hits: list[Hit] = []
    items = list(reply[1:])
    for fields in items[1::2]:
        values = {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in zip(fields[::2], fields[1::2], strict=True)
        }
        hits.append(
            Hit(
                filename=values.get("filename", ""),
                ref=values.get("ref") or None,
                collection=values.get("collection", ""),
                position=values.get("position", ""),
                index=int(values.get("index", 0)),
                score=round(1.0 - float(values.get("dist", 1.0)), 4),
                text=values.get("text", ""),
            )
        )
    return hits


async def query_engine_available(client: aioredis.Redis) -> bool:
    """Whether the server has the query engine (``FT._LIST`` answers), without assuming a version."""
    try:
        await _command(client, "FT._LIST")
    except ResponseError:
        return False
    return True


async def open_store(client: aioredis.Redis, backend: str, *, cache_bytes: int) -> VectorStore:
    """The store ``backend`` names; ``auto`` feature-detects the query engine."""
    if backend == "redis-query" or (backend == "auto" and await query_engine_available(client)):
        logger.info("RAG vectors: Redis query engine (HNSW index)")
        return QueryEngineStore(client)
    logger.info("RAG vectors: brute-force cosine search with numpy (no Redis query engine)")
    return BruteForceStore(client, cache_bytes=cache_bytes)


def now() -> float:
    return round(time.time(), 3)
