"""RAG · Indexer (``document-indexer-agent``): ``index_document`` and ``search_knowledge``.

Embeds chunks (``OPENAGENT_EMBEDDING_BACKEND``: the OpenAI-compatible API with
``OPENAGENT_EMBEDDING_MODEL``, or the local MiniLM model) and stores them in Redis at
its own ``REDIS_URL`` (a sidecar or a shared Redis), scoped to the master's session.
Run it next to a master::

    PYTHONPATH=. python -m system_agents.document_indexer_agent

Settings: see :mod:`openagent.rag.config`. Needs ``pip install 'openagent[rag]'``. The tools
are written out here so that ``GET /agents/discover`` can read them without importing the
module; a test pins them to :data:`openagent.rag.agents.INDEXER_TOOLS`.
"""

from __future__ import annotations

from openagent import OrchestratorActionAgent
from openagent.config import ClientConfig
from openagent.rag.agents import RagRuntime, run_rag_stack

AGENT_ID = "document-indexer-agent"
TOOLS = [
    {
        "name": "index_document",
        "description": "Index an attached file for search_knowledge: pass its ref (or chunks from "
        "extract_document). Indexing the same file again changes nothing.",
        "parameters": {
            "type": "object",
            "properties": {
                "ref": {
                    "type": "string",
                    "pattern": "^att_[0-9a-f]{24}$",
                    "description": "Attachment ref, e.g. att_0123456789abcdef01234567",
                },
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
                "collection": {
                    "type": "string",
                    "pattern": "^[A-Za-z0-9_.-]{1,64}$",
                    "description": "Optional named collection inside the session (default 'default')",
                },
            },
            "additionalProperties": False,
        },
    },
    {
        "name": "search_knowledge",
        "description": "Search the files attached in this conversation (earlier ones too) and return the "
        "best passages with filename, position and score. Files not indexed yet are "
        "indexed first.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "What to look for, in words"},
                "top_k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
                "filters": {
                    "type": "object",
                    "properties": {
                        "collection": {
                            "type": "string",
                            "pattern": "^[A-Za-z0-9_.-]{1,64}$",
                            "description": "Optional named collection inside the session (default 'default')",
                        },
                        "filenames": {"type": "array", "items": {"type": "string"}},
                        "refs": {"type": "array", "items": {"type": "string"}},
                    },
                    "additionalProperties": False,
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
]


def build_agent(runtime: RagRuntime, config: ClientConfig | None = None) -> OrchestratorActionAgent:
    """The indexer agent, serving ``index_document`` and ``search_knowledge`` with ``runtime``."""
    metadata = {
        "name": "RAG · Indexer",
        "rag": "indexer",
        "embedding_model": runtime.indexer.embedder.model,
        "vector_backend": runtime.indexer.store.backend,
    }
    return OrchestratorActionAgent(AGENT_ID, TOOLS, runtime.indexer_tool, metadata=metadata, config=config)


if __name__ == "__main__":
    run_rag_stack((build_agent,))
