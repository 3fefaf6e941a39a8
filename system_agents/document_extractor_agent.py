"""RAG · Extractor (``document-extractor-agent``): ``extract_document(ref)`` over WebSocket.

Reads an attached file (fetched through the master with the call's token) and returns
its chunks with filename, position and text. Run it next to a master::

    PYTHONPATH=. python -m system_agents.document_extractor_agent

Settings: see :mod:`openagent.rag.config` (``MASTER_WS``, ``REDIS_URL`` for the extract
cache, ``RAG_CHUNK_TOKENS``...). Needs ``pip install 'openagent[rag]'``. The tools are
written out here so that ``GET /agents/discover`` can read them without importing the
module; a test pins them to :data:`openagent.rag.agents.EXTRACTOR_TOOLS`.
"""

from __future__ import annotations

from openagent import OrchestratorActionAgent
from openagent.config import ClientConfig
from openagent.rag.agents import RagRuntime, run_rag_stack

AGENT_ID = "document-extractor-agent"
TOOLS = [
    {
        "name": "extract_document",
        "description": "Read an attached file (PDF, DOCX, HTML, Markdown, text, CSV, JSON) and return "
        "its text as chunks with filename and position (page or section). For long files "
        "prefer index_document and search_knowledge.",
        "parameters": {
            "type": "object",
            "properties": {
                "ref": {
                    "type": "string",
                    "pattern": "^att_[0-9a-f]{24}$",
                    "description": "Attachment ref, e.g. att_0123456789abcdef01234567",
                }
            },
            "required": ["ref"],
            "additionalProperties": False,
        },
    }
]


def build_agent(runtime: RagRuntime, config: ClientConfig | None = None) -> OrchestratorActionAgent:
    """The extractor agent, serving ``extract_document`` with ``runtime``."""
    return OrchestratorActionAgent(
        AGENT_ID,
        TOOLS,
        runtime.extract_tool,
        metadata={"name": "RAG · Extractor", "rag": "extractor"},
        config=config,
    )


if __name__ == "__main__":
    run_rag_stack((build_agent,))
