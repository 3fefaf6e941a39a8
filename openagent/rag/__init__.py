"""The RAG system agents: read attached files, chunk them, embed them, search them.

Two SDK action agents, run by the modules in ``system_agents/`` (``rag_stack_ws`` runs both
in one process):

- the **extractor** (``document-extractor-agent``, tool ``extract_document``) fetches an
  attachment from the master, reads it and returns positioned chunks;
- the **indexer** (``document-indexer-agent``, tools ``index_document`` and
  ``search_knowledge``) embeds chunks into the session's vector store and searches it.

One concept per module, from the file's bytes to a search hit:

========================= ===================================================================
:mod:`.formats`           what kind of file a blob is (standard library only; the master
                          runs the same check when a file is attached)
:mod:`.extract`           a file's bytes as positioned sections, one reader per format
:mod:`.chunking`          sections cut into token-sized chunks with overlap
:mod:`.extractor`         fetch, read, chunk and cache an attachment (``extract_document``)
:mod:`.embeddings`        the embedding backends (OpenAI-compatible API, local MiniLM, hashing)
:mod:`.store`             chunks and vectors in Redis, scoped by session (brute force or the
                          Redis query engine)
:mod:`.indexer`           ``index_document`` and ``search_knowledge``
:mod:`.config`            the agents' settings, read from the environment
:mod:`.agents`            the tools, their handlers and the process that runs both agents
========================= ===================================================================

Tokens are counted with the SDK's offline ``cl100k_base`` (``openagent._tokens``), the
master's tokenizer too.

Needs the ``rag`` extra (``pip install 'openagent[rag]'``: redis, numpy, pypdf,
python-docx, tiktoken). ``import openagent`` never imports this package, and this package
imports its modules on first use, so ``from openagent.rag import detect_format`` needs
nothing beyond the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openagent._lazy import lazy_names

if TYPE_CHECKING:
    from openagent.rag.agents import (
        EXTRACTOR_TOOLS,
        INDEXER_TOOLS,
        RagRuntime,
        RagStack,
        extractor_agent,
        indexer_agent,
        run_rag_stack,
    )
    from openagent.rag.chunking import ChunkPolicy, chunk_sections
    from openagent.rag.config import RagConfig
    from openagent.rag.embeddings import (
        Embedder,
        HashingEmbedder,
        MiniLMEmbedder,
        OpenAIEmbedder,
        embedder_from_config,
    )
    from openagent.rag.extract import extract_sections
    from openagent.rag.extractor import DocumentExtractor
    from openagent.rag.formats import FormatMismatch, detect_format
    from openagent.rag.indexer import DocumentIndexer
    from openagent.rag.store import BruteForceStore, QueryEngineStore, SearchFilters, VectorStore, open_store

_LAZY = {
    "BruteForceStore": "store",
    "ChunkPolicy": "chunking",
    "DocumentExtractor": "extractor",
    "DocumentIndexer": "indexer",
    "EXTRACTOR_TOOLS": "agents",
    "Embedder": "embeddings",
    "FormatMismatch": "formats",
    "HashingEmbedder": "embeddings",
    "INDEXER_TOOLS": "agents",
    "MiniLMEmbedder": "embeddings",
    "OpenAIEmbedder": "embeddings",
    "QueryEngineStore": "store",
    "RagConfig": "config",
    "RagRuntime": "agents",
    "RagStack": "agents",
    "SearchFilters": "store",
    "VectorStore": "store",
    "chunk_sections": "chunking",
    "detect_format": "formats",
    "embedder_from_config": "embeddings",
    "extract_sections": "extract",
    "extractor_agent": "agents",
    "indexer_agent": "agents",
    "open_store": "store",
    "run_rag_stack": "agents",
}
"""Public name → the module of this package that defines it (imported on first use)."""


__getattr__ = lazy_names(__name__, _LAZY, "rag")


__all__ = [
    "BruteForceStore",
    "ChunkPolicy",
    "DocumentExtractor",
    "DocumentIndexer",
    "EXTRACTOR_TOOLS",
    "Embedder",
    "FormatMismatch",
    "HashingEmbedder",
    "INDEXER_TOOLS",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "QueryEngineStore",
    "RagConfig",
    "RagRuntime",
    "RagStack",
    "SearchFilters",
    "VectorStore",
    "chunk_sections",
    "detect_format",
    "embedder_from_config",
    "extract_sections",
    "extractor_agent",
    "indexer_agent",
    "open_store",
    "run_rag_stack",
]
