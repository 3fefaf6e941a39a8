"""The extractor: fetch an attachment through the master, read it, chunk it, cache the result.

The blob comes from ``GET {master}/attachments/{ref}`` with the call's token (see
:mod:`protocol.rag`), so the extractor needs no access to the master's Redis. The
chunks are cached in the extractor's own Redis by the content's SHA-256 (and the
chunking settings) for ``RAG_EXTRACT_CACHE_TTL_SECONDS``: the same file attached in
another session, or indexed after being extracted, is read once.

Pages without text (scans) and images go to the vision model
``OPENAGENT_RAG_EXTRACT_MODEL`` when one is configured; otherwise the result's
warnings say which pages have no extractable text.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import httpx
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from openagent.errors import DocumentError, ToolError
from openagent.rag.chunking import ChunkPolicy, chunk_sections
from openagent.rag.config import RagConfig
from openagent.rag.extract import Extraction, Section, VisionRequest, extract_sections
from protocol.rag import CALL_TOKEN_HEADER, FILENAME_HEADER, REF_RE, Chunk, RagCallContext

__all__ = ["Blob", "DocumentExtractor", "ExtractedDocument"]

logger = logging.getLogger("openagent.rag")

CACHE_PREFIX = "openagent:rag:extract:"
VISION_PROMPT = (
    "Transcribe all the text in this image, in reading order, as plain text. "
    "If it has no text, describe its content in two sentences."
)


@dataclass(frozen=True, slots=True)
class Blob:
    ref: str
    filename: str
    mime_type: str
    data: bytes


@dataclass(slots=True)
class ExtractedDocument:
    filename: str
    ref: str | None
    sha256: str
    format: str
    pages: int | None
    chunks: list[Chunk]
    warnings: list[str] = field(default_factory=list)
    cached: bool = False


class DocumentExtractor:
    """Turns attachment refs into chunks; shared by the extractor and the indexer agents."""

    def __init__(self, config: RagConfig, *, redis: aioredis.Redis | None, http: httpx.AsyncClient) -> None:
        self._config = config
        self._redis = redis
        self._http = http
        self._policy = ChunkPolicy(config.chunk_tokens, config.overlap_tokens)
        self.cache_hits = 0
        self.extractions = 0

    async def fetch(self, context: RagCallContext, ref: str) -> Blob:
        """The attachment's bytes, from the master, with the call's token."""
        if not REF_RE.fullmatch(ref):
            raise ToolError(f"invalid attachment ref {ref!r}: refs look like 'att_' and 24 hex digits")
        if context.blob_token is None:
            raise ToolError(f"attachment {ref} cannot be fetched: this session has no attachments")
        url = f"{self._config.master_base_url}/attachments/{quote(ref)}"
        headers = {CALL_TOKEN_HEADER: context.blob_token}
        if self._config.master_api_key:
            headers["Authorization"] = f"Bearer {self._config.master_api_key}"
        try:
            response = await self._http.get(url, headers=headers, timeout=self._config.blob_timeout)
        except httpx.HTTPError as exc:
            raise ToolError(f"could not fetch attachment {ref} from the master at {url}: {exc!r}") from None
        if response.status_code == 404:
            raise ToolError(f"no attachment {ref} in this session (unknown ref, or the session expired)")
        if response.status_code in (401, 403):
            raise ToolError(f"the master refused to send attachment {ref}: {response.text[:200]}")
        if response.status_code != 200:
            raise ToolError(
                f"the master answered {response.status_code} for attachment {ref}: {response.text[:200]}"
            )
        filename = unquote(response.headers.get(FILENAME_HEADER, ref))
        mime_type = response.headers.get("content-type", "application/octet-stream")
        return Blob(ref, filename, mime_type, response.content)

    async def extract(self, context: RagCallContext, ref: str, *, progress: Any = None) -> ExtractedDocument:
        """Fetch and extract ``ref``, from the cache when its content was extracted before."""
        blob = await self.fetch(context, ref)
        return await self.extract_blob(blob, progress=progress)

    async def extract_blob(self, blob: Blob, *, progress: Any = None) -> ExtractedDocument:
        sha = hashlib.sha256(blob.data).hexdigest()
        cached = await self._cache_get(sha, blob.mime_type)
        if cached is not None:
            self.cache_hits += 1
            chunks = [
                chunk.model_copy(update={"filename": blob.filename, "ref": blob.ref}) for chunk in cached[0]
            ]
            return ExtractedDocument(
                blob.filename, blob.ref, sha, cached[1], cached[2], chunks, cached[3], cached=True
            )
        if progress is not None:
            await progress(f"reading {blob.filename}", 0.1)
        extraction = await asyncio.to_thread(
            extract_sections, blob.data, filename=blob.filename, mime_type=blob.mime_type
        )
        await self._transcribe(extraction, blob.filename)
        chunks = await asyncio.to_thread(
            chunk_sections,
            extraction.sections,
            filename=blob.filename,
            ref=blob.ref,
            policy=self._policy,
            pack=extraction.format != "pdf",
        )
        if not chunks:
            details = "; ".join(extraction.warnings) or "no text found"
            raise DocumentError(blob.filename, f"no extractable text ({details})")
        self.extractions += 1
        document = ExtractedDocument(
            blob.filename, blob.ref, sha, extraction.format, extraction.pages, chunks, extraction.warnings
        )
        await self._cache_put(sha, blob.mime_type, document)
        return document

    # ------------------------------------------------------------------ vision

    async def _transcribe(self, extraction: Extraction, filename: str) -> None:
        for request in extraction.needs_vision:
            if not self._config.vision:
                extraction.warnings.append(
                    f"{request.position} has no extractable text (no vision model is configured)"
                )
                continue
            try:
                text = await self._vision(request)
            except ToolError as exc:
                extraction.warnings.append(f"{request.position} has no extractable text ({exc})")
                continue
            extraction.sections.append(Section(request.position, text))
        extraction.sections.sort(key=_page_order)

    async def _vision(self, request: VisionRequest) -> str:
        image = base64.b64encode(request.image).decode("ascii")
        body = {
            "model": self._config.extract_model,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": VISION_PROMPT},
                        {
                            "type": "image_url",
                            "image_url": {"url": f"data:{request.mime_type};base64,{image}"},
                        },
                    ],
                }
            ],
        }
        headers = (
            {"Authorization": f"Bearer {self._config.openai_api_key}"} if self._config.openai_api_key else {}
        )
        url = self._config.openai_base_url.rstrip("/") + "/chat/completions"
        try:
            response = await self._http.post(url, json=body, headers=headers, timeout=120.0)
        except httpx.HTTPError as exc:
            raise ToolError(f"vision model {self._config.extract_model!r} unreachable: {exc!r}") from None
        if response.status_code != 200:
            raise ToolError(
                f"vision model {self._config.extract_model!r} answered {response.status_code}: {response.text[:160]}"
            )
        try:
            return str(response.json()["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError, ValueError):
            raise ToolError(f"vision model {self._config.extract_model!r} sent no text") from None

    # ------------------------------------------------------------------ cache

    def _cache_key(self, sha: str, mime_type: str) -> str:
        policy = f"{self._policy.chunk_tokens}-{self._policy.overlap_tokens}-{int(self._config.vision)}"
        kind = hashlib.sha256(mime_type.encode()).hexdigest()[:8]
        return f"{CACHE_PREFIX}{sha}:{kind}:{policy}"

    async def _cache_get(
        self, sha: str, mime_type: str
    ) -> tuple[list[Chunk], str, int | None, list[str]] | None:
        if self._redis is None:
            return None
        try:
            raw = await self._redis.get(self._cache_key(sha, mime_type))
        except RedisError as exc:
            logger.warning("extract cache unavailable: %s", exc)
            return None
        if raw is None:
            return None
        value = json.loads(raw)
        chunks = [Chunk.model_validate(item) for item in value["chunks"]]
        return chunks, value["format"], value["pages"], value["warnings"]

    async def _cache_put(self, sha: str, mime_type: str, document: ExtractedDocument) -> None:
        if self._redis is None:
            return
        value = {
            "format": document.format,
            "pages": document.pages,
            "warnings": document.warnings,
            "chunks": [
                chunk.model_dump(exclude={"filename", "ref"}) | {"filename": ""} for chunk in document.chunks
            ],
        }
        try:
            await self._redis.set(
                self._cache_key(sha, mime_type), json.dumps(value), ex=self._config.extract_cache_ttl
            )
        except RedisError as exc:
            logger.warning("extract cache unavailable: %s", exc)


def _page_order(section: Section) -> tuple[int, str]:
    kind, _, number = section.position.partition(" ")
    if kind == "page" and number.isdigit():
        return int(number), ""
    return 0, ""
