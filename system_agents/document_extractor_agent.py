"""RAG · Extractor (``document-extractor-agent``): ``extract_document(ref)`` over WebSocket.

Reads an attached file (fetched through the master with the call's token) and returns
its chunks with filename, position and text. Run it next to a master::

    PYTHONPATH=. python -m system_agents.document_extractor_agent

Settings: see :mod:`openagent.rag_config` (``MASTER_WS``, ``REDIS_URL`` for the extract
cache, ``RAG_CHUNK_TOKENS``...). Needs ``pip install 'openagent[rag]'``.
"""

from __future__ import annotations

from openagent.rag_agents import run_rag_stack

AGENT_ID = "document-extractor-agent"

if __name__ == "__main__":
    run_rag_stack(("extractor",))
