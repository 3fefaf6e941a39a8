"""RAG · Indexer (``document-indexer-agent``): ``index_document`` and ``search_knowledge``.

Embeds chunks (``OPENAGENT_EMBEDDING_BACKEND``: the OpenAI-compatible API with
``OPENAGENT_EMBEDDING_MODEL``, or the local MiniLM model) and stores them in Redis at
its own ``REDIS_URL`` (a sidecar or a shared Redis), scoped to the master's session.
Run it next to a master::

    PYTHONPATH=. python -m system_agents.document_indexer_agent

Settings: see :mod:`openagent.rag_config`. Needs ``pip install 'openagent[rag]'``.
"""

from __future__ import annotations

from openagent.rag_agents import run_rag_stack

AGENT_ID = "document-indexer-agent"

if __name__ == "__main__":
    run_rag_stack(("indexer",))
