"""Settings of the RAG system agents (extractor and indexer), read from the environment.

========================================== =============================== =========================================
Variable                                   Default                         Meaning
========================================== =============================== =========================================
``REDIS_URL``                              ``redis://127.0.0.1:6379``      The agents' own Redis: extract cache, vectors
``MASTER_WS``                              ``ws://127.0.0.1:8000/ws``      The master; blobs are fetched from its HTTP side
``MASTER_BASE_URL``                        derived from ``MASTER_WS``      HTTP URL of the master, when it differs
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``   OpenAI                          Embeddings API and vision model
``OPENAGENT_EMBEDDING_BACKEND``            ``openai``                      ``openai``, ``minilm`` (local) or ``hashing``
``OPENAGENT_EMBEDDING_MODEL``              ``text-embedding-3-small``      Model of the ``openai`` backend
``OPENAGENT_RAG_EXTRACT_MODEL``            ``gpt-4o-mini``                 Vision model for pages without text
``OPENAGENT_RAG_VISION``                   ``1``                           ``0``: never send images to a model
``RAG_EXTRACT_CACHE_TTL_SECONDS``          ``604800``                      Extract cache TTL (by content hash)
``RAG_CHUNK_TOKENS``                       ``200``                         Chunk size (cl100k tokens)
``RAG_CHUNK_OVERLAP_TOKENS``               ``30``                          Overlap between neighbouring chunks
``RAG_EXTRACT_MAX_RESULT_TOKENS``          ``6000``                        Chunk text ``extract_document`` returns at most
``RAG_VECTOR_BACKEND``                     ``auto``                        ``auto``, ``bruteforce`` or ``redis-query``
``RAG_SEARCH_CACHE_MB``                    ``512``                         Vectors kept in memory for brute-force search
========================================== =============================== =========================================

The vision model is used only when an LLM is configured (``OPENAI_API_KEY`` or
``OPENAI_BASE_URL`` set) and ``OPENAGENT_RAG_VISION`` is not ``0``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from openagent.errors import ConfigurationError

__all__ = ["RagConfig"]

EmbeddingBackend = Literal["openai", "minilm", "hashing"]
VectorBackend = Literal["auto", "bruteforce", "redis-query"]


@dataclass(frozen=True)
class RagConfig:
    """What the extractor and the indexer need besides their connection to the master."""

    redis_url: str = "redis://127.0.0.1:6379"
    master_base_url: str = "http://127.0.0.1:8000"
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str | None = field(default=None, repr=False)
    master_api_key: str | None = field(default=None, repr=False)
    embedding_backend: EmbeddingBackend = "openai"
    embedding_model: str = "text-embedding-3-small"
    extract_model: str = "gpt-4o-mini"
    vision: bool = False
    extract_cache_ttl: int = 604800
    chunk_tokens: int = 200
    overlap_tokens: int = 30
    extract_max_result_tokens: int = 6000
    vector_backend: VectorBackend = "auto"
    search_cache_bytes: int = 512 * 1024 * 1024
    blob_timeout: float = 60.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RagConfig:
        """Read the variables of the module's table (an empty value counts as unset)."""
        env = {key: value for key, value in (os.environ if environ is None else environ).items() if value}
        backend = env.get("OPENAGENT_EMBEDDING_BACKEND", "openai").lower()
        if backend not in ("openai", "minilm", "hashing"):
            raise ConfigurationError(
                f"OPENAGENT_EMBEDDING_BACKEND must be openai, minilm or hashing, got {backend!r}"
            )
        vector = env.get("RAG_VECTOR_BACKEND", "auto").lower()
        if vector not in ("auto", "bruteforce", "redis-query"):
            raise ConfigurationError(
                f"RAG_VECTOR_BACKEND must be auto, bruteforce or redis-query, got {vector!r}"
            )
        llm = bool(env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"))
        master_ws = env.get("MASTER_WS", "ws://127.0.0.1:8000/ws")
        return cls(
            redis_url=env.get("REDIS_URL", cls.redis_url),
            master_base_url=env.get("MASTER_BASE_URL") or http_url_of(master_ws),
            openai_base_url=env.get("OPENAI_BASE_URL", cls.openai_base_url),
            openai_api_key=env.get("OPENAI_API_KEY"),
            master_api_key=env.get("OPENAGENT_API_KEY"),
            embedding_backend=backend,  # type: ignore[arg-type]
            embedding_model=env.get("OPENAGENT_EMBEDDING_MODEL", cls.embedding_model),
            extract_model=env.get("OPENAGENT_RAG_EXTRACT_MODEL", cls.extract_model),
            vision=llm and env.get("OPENAGENT_RAG_VISION", "1") not in ("0", "false", "no"),
            extract_cache_ttl=_int(env, "RAG_EXTRACT_CACHE_TTL_SECONDS", cls.extract_cache_ttl),
            chunk_tokens=_int(env, "RAG_CHUNK_TOKENS", cls.chunk_tokens),
            overlap_tokens=_int(env, "RAG_CHUNK_OVERLAP_TOKENS", cls.overlap_tokens),
            extract_max_result_tokens=_int(
                env, "RAG_EXTRACT_MAX_RESULT_TOKENS", cls.extract_max_result_tokens
            ),
            vector_backend=vector,  # type: ignore[arg-type]
            search_cache_bytes=_int(env, "RAG_SEARCH_CACHE_MB", 512) * 1024 * 1024,
        )


def http_url_of(master_ws: str) -> str:
    """``ws://host:8000/ws`` → ``http://host:8000`` (``wss`` → ``https``)."""
    parts = urlsplit(master_ws)
    scheme = "https" if parts.scheme == "wss" else "http"
    path = parts.path[: -len("/ws")] if parts.path.endswith("/ws") else parts.path
    return urlunsplit((scheme, parts.netloc, path.rstrip("/"), "", ""))


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise ConfigurationError(f"{name} must be positive, got {value}")
    return value
