"""The RAG system agents as SDK WebSocket action agents: tools, handlers, wiring.

Two agents, usually run by the modules in ``system_agents/``:

- the **extractor** (``document-extractor-agent``): ``extract_document(ref)`` returns
  the file's chunks with filename, position and text;
- the **indexer** (``document-indexer-agent``): ``index_document(ref | chunks)`` and
  ``search_knowledge(query, top_k, filters)``.

Both are :class:`~openagent.OrchestratorActionAgent` s. Each call carries the master's
:class:`~protocol.rag.RagCallContext` (session, TTL, blob token); a call without it is
refused, since the session scopes everything. :class:`RagRuntime` owns what the agents
share in one process (Redis client, HTTP client, vector store, embedder).

Needs the ``rag`` extra: ``pip install 'openagent[rag]'``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import redis.asyncio as aioredis
from pydantic import ValidationError

from openagent._tokens import encode
from openagent.action import OrchestratorActionAgent, ProgressCallback
from openagent.config import ClientConfig
from openagent.errors import ToolError
from openagent.rag.config import RagConfig
from openagent.rag.embeddings import Embedder, embedder_from_config
from openagent.rag.extractor import DocumentExtractor
from openagent.rag.indexer import DEFAULT_COLLECTION, DocumentIndexer
from openagent.rag.store import SearchFilters, VectorStore, open_store
from protocol import ToolSchema
from protocol.rag import (
    COLLECTION_PATTERN,
    EXTRACT_TOOL,
    EXTRACTOR_AGENT_ID,
    INDEX_TOOL,
    INDEXER_AGENT_ID,
    RAG_CONTEXT_ARGUMENT,
    REF_PATTERN,
    SEARCH_TOOL,
    Chunk,
    RagCallContext,
)

__all__ = [
    "EXTRACTOR_TOOLS",
    "INDEXER_TOOLS",
    "RagRuntime",
    "RagStack",
    "extractor_agent",
    "indexer_agent",
    "run_rag_stack",
]

logger = logging.getLogger("openagent.rag")

_REF = {
    "type": "string",
    "pattern": REF_PATTERN,
    "description": "Attachment ref, e.g. att_0123456789abcdef01234567",
}
_COLLECTION = {
    "type": "string",
    "pattern": COLLECTION_PATTERN,
    "description": f"Optional named collection inside the session (default {DEFAULT_COLLECTION!r})",
}

EXTRACTOR_TOOLS = [
    ToolSchema(
        name=EXTRACT_TOOL,
        description=(
            "Read an attached file (PDF, DOCX, HTML, Markdown, text, CSV, JSON) and return its text as "
            "chunks with filename and position (page or section). For long files prefer index_document "
            "and search_knowledge."
        ),
        parameters={
            "type": "object",
            "properties": {"ref": _REF},
            "required": ["ref"],
            "additionalProperties": False,
        },
    )
]
INDEXER_TOOLS = [
    ToolSchema(
        name=INDEX_TOOL,
        description=(
            "Index an attached file for search_knowledge: pass its ref (or chunks from extract_document). "
            "Indexing the same file again changes nothing."
        ),
        parameters={
            "type": "object",
            "properties": {
                "ref": _REF,
                "chunks": {
                    "type": "array",
                    "maxItems": 2000,
                    "items": {
                        "type": "object",
                        "properties": {
                            "filename": {"type": "string"},
                            "position": {"type": "string"},
                            "text": {"type": "string"},
                            "ref": {"type": "string"},
                            "index": {"type": "integer", "minimum": 0},
                        },
                        "required": ["filename", "position", "text"],
                    },
                },
                "collection": _COLLECTION,
            },
            "additionalProperties": False,
        },
    ),
    ToolSchema(
        name=SEARCH_TOOL,
        description=(
            "Search the files attached in this conversation (earlier ones too) and return the best "
            "passages with filename, position and score. Files not indexed yet are indexed first."
        ),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "What to look for, in words"},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
                "filters": {
                    "type": "object",
                    "properties": {
                        "collection": _COLLECTION,
                        "filenames": {"type": "array", "items": {"type": "string"}},
                        "refs": {"type": "array", "items": {"type": "string"}},
                    },
                    "additionalProperties": False,
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
]


def call_context(arguments: Mapping[str, Any]) -> RagCallContext:
    """The master's call context, or a ``ToolError`` saying it is missing."""
    raw = arguments.get(RAG_CONTEXT_ARGUMENT)
    if raw is None:
        raise ToolError(
            "this RAG tool must be called through an OpenAgent master that supports attachments "
            f"(the call has no {RAG_CONTEXT_ARGUMENT!r} context naming the session)"
        )
    try:
        return RagCallContext.model_validate(raw)
    except ValidationError as exc:
        raise ToolError(f"invalid {RAG_CONTEXT_ARGUMENT!r} context: {exc.errors()[0]['msg']}") from None


@dataclass
class RagRuntime:
    """What the RAG agents of one process share; :meth:`open` builds it from a :class:`RagConfig`."""

    config: RagConfig
    redis: aioredis.Redis
    http: httpx.AsyncClient
    extractor: DocumentExtractor
    indexer: DocumentIndexer

    @classmethod
    async def open(
        cls, config: RagConfig, *, embedder: Embedder | None = None, store: VectorStore | None = None
    ) -> RagRuntime:
        client = aioredis.Redis.from_url(config.redis_url, socket_connect_timeout=5)
        http = httpx.AsyncClient(timeout=60.0)
        extractor = DocumentExtractor(config, redis=client, http=http)
        store = store or await open_store(
            client, config.vector_backend, cache_bytes=config.search_cache_bytes
        )
        embedder = embedder or embedder_from_config(config, http)
        indexer = DocumentIndexer(store=store, embedder=embedder, extractor=extractor)
        return cls(config, client, http, extractor, indexer)

    async def aclose(self) -> None:
        await self.http.aclose()
        await self.redis.aclose()

    # ------------------------------------------------------------------ handlers

    async def extract_tool(
        self, tool_name: str, arguments: dict[str, Any], *, progress_callback: ProgressCallback
    ) -> Any:
        context = call_context(arguments)
        document = await self.extractor.extract(
            context, str(arguments.get("ref")), progress=progress_callback
        )
        budget = self.config.extract_max_result_tokens
        shown: list[dict[str, Any]] = []
        for chunk in document.chunks:
            budget -= len(encode(chunk.text))
            if budget < 0 and shown:
                break
            shown.append(chunk.model_dump())
        result: dict[str, Any] = {
            "filename": document.filename,
            "ref": document.ref,
            "format": document.format,
            "pages": document.pages,
            "chunk_count": len(document.chunks),
            "chunks": shown,
            "cached": document.cached,
        }
        if len(shown) < len(document.chunks):
            result["truncated"] = (
                f"only the first {len(shown)} of {len(document.chunks)} chunks are shown; "
                "use index_document and search_knowledge for the rest"
            )
        if document.warnings:
            result["warnings"] = document.warnings
        return result

    async def indexer_tool(
        self, tool_name: str, arguments: dict[str, Any], *, progress_callback: ProgressCallback
    ) -> Any:
        context = call_context(arguments)
        if tool_name == SEARCH_TOOL:
            raw_filters = arguments.get("filters") or {}
            filters = SearchFilters(
                collection=raw_filters.get("collection"),
                filenames=tuple(raw_filters.get("filenames") or ()),
                refs=tuple(raw_filters.get("refs") or ()),
            )
            return await self.indexer.search(
                context,
                str(arguments.get("query", "")),
                top_k=int(arguments.get("top_k") or 5),
                filters=filters,
                progress=progress_callback,
            )
        collection = str(arguments.get("collection") or DEFAULT_COLLECTION)
        ref, chunks = arguments.get("ref"), arguments.get("chunks")
        if (ref is None) == (chunks is None):
            raise ToolError("index_document needs either 'ref' (an attachment) or 'chunks', not both")
        if ref is not None:
            return await self.indexer.index_ref(
                context, str(ref), collection=collection, progress=progress_callback
            )
        try:
            parsed = [Chunk.model_validate({"index": i, **item}) for i, item in enumerate(chunks or [])]
        except (ValidationError, TypeError) as exc:
            raise ToolError(f"invalid chunks: {exc}") from None
        return await self.indexer.index_chunks(
            context, parsed, collection=collection, progress=progress_callback
        )


def extractor_agent(
    runtime: RagRuntime, *, agent_id: str = EXTRACTOR_AGENT_ID, config: ClientConfig | None = None
) -> OrchestratorActionAgent:
    """The extractor agent, serving ``extract_document`` with ``runtime``."""
    return OrchestratorActionAgent(
        agent_id,
        EXTRACTOR_TOOLS,
        runtime.extract_tool,
        metadata={"name": "RAG · Extractor", "rag": "extractor"},
        config=config,
    )


def indexer_agent(
    runtime: RagRuntime, *, agent_id: str = INDEXER_AGENT_ID, config: ClientConfig | None = None
) -> OrchestratorActionAgent:
    """The indexer agent, serving ``index_document`` and ``search_knowledge`` with ``runtime``."""
    metadata = {
        "name": "RAG · Indexer",
        "rag": "indexer",
        "embedding_model": runtime.indexer.embedder.model,
        "vector_backend": runtime.indexer.store.backend,
    }
    return OrchestratorActionAgent(
        agent_id, INDEXER_TOOLS, runtime.indexer_tool, metadata=metadata, config=config
    )


AgentFactory = Callable[[RagRuntime, ClientConfig | None], OrchestratorActionAgent]
"""Builds one RAG agent on a runtime (``system_agents.*.build_agent``)."""


def _extractor_factory(runtime: RagRuntime, config: ClientConfig | None) -> OrchestratorActionAgent:
    return extractor_agent(runtime, config=config)


def _indexer_factory(runtime: RagRuntime, config: ClientConfig | None) -> OrchestratorActionAgent:
    return indexer_agent(runtime, config=config)


class RagStack:
    """Runs RAG agents in one process, sharing one :class:`RagRuntime`.

    ``run()`` opens the runtime, registers each agent (one connection each), serves until
    one of them stops or the task is cancelled, then stops them and closes the runtime.
    :func:`run_rag_stack` is the entry point.
    """

    def __init__(
        self,
        factories: Sequence[AgentFactory] = (_extractor_factory, _indexer_factory),
        *,
        config: RagConfig | None = None,
        client_config: ClientConfig | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        if not factories:
            raise ValueError("RagStack needs at least one agent factory")
        self.factories = tuple(factories)
        self.config = config or RagConfig.from_env()
        self.client_config = client_config
        self.embedder = embedder
        self.runtime: RagRuntime | None = None
        self.agents: list[OrchestratorActionAgent] = []

    @property
    def agent_id(self) -> str:
        return " + ".join(agent.agent_id for agent in self.agents) or "RAG agents"

    async def start(self) -> None:
        self.runtime = runtime = await RagRuntime.open(self.config, embedder=self.embedder)
        self.agents = [factory(runtime, self.client_config) for factory in self.factories]
        for agent in self.agents:
            await agent.start()

    async def run(self) -> None:
        try:
            if self.runtime is None:
                await self.start()
            tasks = [asyncio.create_task(agent.run(), name=f"rag-{agent.agent_id}") for agent in self.agents]
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await self.stop()

    async def stop(self) -> None:
        for agent in self.agents:
            await agent.stop()
        self.agents = []
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            await runtime.aclose()


def run_rag_stack(factories: Sequence[AgentFactory]) -> None:
    """Run the RAG agents ``factories`` build until Ctrl-C or SIGTERM (entry point of ``system_agents``)."""
    from openagent._runner import run_until_signalled

    run_until_signalled(RagStack(factories), kind="RAG agents", log=logger)
