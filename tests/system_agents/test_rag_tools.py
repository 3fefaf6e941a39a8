"""The RAG agents' tool handlers (openagent.rag.agents) without a master: call context,
argument rules, result shapes. End-to-end runs with a master are in tests/system_agents/test_rag_stack.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from openagent.errors import ToolError
from openagent.rag.agents import EXTRACTOR_TOOLS, INDEXER_TOOLS, RagRuntime
from openagent.rag.config import RagConfig
from openagent.rag.embeddings import HashingEmbedder
from protocol.rag import EXTRACT_TOOL, INDEX_TOOL, RAG_CONTEXT_ARGUMENT, SEARCH_TOOL
from tests.factories import TEST_REDIS_URL
from tests.openagent.rag.test_indexer import FakeMaster


async def no_progress(message: str, progress: float | None = None) -> None:
    return None


@pytest.fixture
async def runtime() -> AsyncIterator[tuple[RagRuntime, FakeMaster]]:
    master = FakeMaster()
    config = RagConfig(
        redis_url=TEST_REDIS_URL, master_base_url="http://master.test", extract_max_result_tokens=60
    )
    opened = await RagRuntime.open(config, embedder=HashingEmbedder())
    await opened.http.aclose()
    opened.http = httpx.AsyncClient(transport=httpx.MockTransport(master.handler))
    opened.extractor._http = opened.http
    yield opened, master
    await opened.aclose()


def test_tool_names_are_the_contract() -> None:
    assert [tool.name for tool in EXTRACTOR_TOOLS] == [EXTRACT_TOOL]
    assert [tool.name for tool in INDEXER_TOOLS] == [INDEX_TOOL, SEARCH_TOOL]
    for tool in [*EXTRACTOR_TOOLS, *INDEXER_TOOLS]:
        assert RAG_CONTEXT_ARGUMENT not in tool.parameters["properties"]  # the model never writes it


async def test_call_without_master_context_is_refused(runtime: tuple[RagRuntime, FakeMaster]) -> None:
    rag, _ = runtime
    with pytest.raises(ToolError, match="must be called through an OpenAgent master"):
        await rag.indexer_tool(SEARCH_TOOL, {"query": "x"}, progress_callback=no_progress)


async def test_extract_result_is_bounded_and_says_so(runtime: tuple[RagRuntime, FakeMaster]) -> None:
    rag, master = runtime
    text = "\n\n".join(f"Paragraph {n} says something about topic {n}." * 8 for n in range(30))
    ref = master.attach("ex", "long.txt", "text/plain", text.encode()).ref
    args: dict[str, Any] = {"ref": ref, RAG_CONTEXT_ARGUMENT: master.context("ex").model_dump()}
    result = await rag.extract_tool(EXTRACT_TOOL, args, progress_callback=no_progress)
    assert result["filename"] == "long.txt"
    assert result["chunk_count"] > len(result["chunks"]) >= 1
    assert "index_document and search_knowledge" in result["truncated"]
    first = result["chunks"][0]
    assert set(first) >= {"filename", "position", "text"}


async def test_index_needs_exactly_one_of_ref_and_chunks(runtime: tuple[RagRuntime, FakeMaster]) -> None:
    rag, master = runtime
    context = master.context("one").model_dump()
    with pytest.raises(ToolError, match="either 'ref'"):
        await rag.indexer_tool(INDEX_TOOL, {RAG_CONTEXT_ARGUMENT: context}, progress_callback=no_progress)
    chunks = [{"filename": "n.txt", "position": "lines 1-2", "text": "pasted chunk about owls"}]
    done = await rag.indexer_tool(
        INDEX_TOOL, {"chunks": chunks, RAG_CONTEXT_ARGUMENT: context}, progress_callback=no_progress
    )
    assert (done["status"], done["chunks"]) == ("indexed", 1)
    found = await rag.indexer_tool(
        SEARCH_TOOL, {"query": "owls", RAG_CONTEXT_ARGUMENT: context}, progress_callback=no_progress
    )
    assert found["results"][0]["text"] == "pasted chunk about owls"


def test_system_agent_modules_spell_out_the_sdk_tools() -> None:
    """The modules' literal TOOLS (read by GET /agents/discover without importing) are the SDK's."""
    from system_agents import document_extractor_agent, document_indexer_agent

    assert document_extractor_agent.TOOLS == [
        t.model_dump(exclude_none=True, exclude_defaults=True) for t in EXTRACTOR_TOOLS
    ]
    assert document_indexer_agent.TOOLS == [
        t.model_dump(exclude_none=True, exclude_defaults=True) for t in INDEXER_TOOLS
    ]
    assert (document_extractor_agent.AGENT_ID, document_indexer_agent.AGENT_ID) == (
        "document-extractor-agent",
        "document-indexer-agent",
    )


def test_discovery_lists_both_rag_agents() -> None:
    from master.builder.discovery import AgentDiscovery
    from tests.factories import ROOT

    found = {agent["agent_id"]: agent for agent in AgentDiscovery(ROOT).discover().as_dict()["agents"]}
    assert [tool["name"] for tool in found["document-extractor-agent"]["tools"]] == [EXTRACT_TOOL]
    assert [tool["name"] for tool in found["document-indexer-agent"]["tools"]] == [INDEX_TOOL, SEARCH_TOOL]
