"""Both RAG agents in one process, two registrations: the extractor and the indexer.

::

    PYTHONPATH=. python -m system_agents.rag_stack_ws

The same as running ``system_agents.document_extractor_agent`` and
``system_agents.document_indexer_agent`` side by side, sharing one Redis client, one
HTTP client and the extract cache. Settings: see :mod:`openagent.rag.config`.
"""

# openagent: launcher

from __future__ import annotations

from openagent.rag.agents import run_rag_stack
from system_agents import document_extractor_agent, document_indexer_agent

if __name__ == "__main__":
    run_rag_stack((document_extractor_agent.build_agent, document_indexer_agent.build_agent))
