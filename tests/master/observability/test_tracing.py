"""One trace per query: the master's spans, and the agent's span under the master's tool-call span.

The master, an SDK invocation agent and an SDK WebSocket agent run in this process, so one
in-memory exporter sees every span: the master's tracer is installed with
``master.observability.tracing.install``, the agents use the global OpenTelemetry provider.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from master.app import create_app
from master.observability import tracing
from master.settings import Settings
from openagent import InvocationActionAgent, OrchestratorActionAgent
from openagent.config import ClientConfig
from openagent.testing import ScriptedOpenAIServer
from tests.factories import TEST_REDIS_URL, free_port

ECHO = {"name": "echo", "description": "Echo", "parameters": {"type": "object"}}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # set by an earlier test: the global is set once
        current.add_span_processor(SimpleSpanProcessor(memory))
    else:
        trace.set_tracer_provider(provider)
    tracing.install(provider)
    yield memory
    tracing.install(None)
    memory.clear()


@contextlib.asynccontextmanager
async def in_process_master(llm: ScriptedOpenAIServer) -> AsyncIterator[str]:
    port = free_port()
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=TEST_REDIS_URL,
        master_base_url=f"http://127.0.0.1:{port}",
        openai_base_url=llm.base_url,
        openagent_llm_max_retries=0,
        openagent_health_check_interval=0,
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(60):
            while not server.started:
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        async with asyncio.timeout(60):
            await task


async def handler(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with trace.get_tracer("agent-code").start_as_current_span("agent work"):
        return {"echo": arguments}


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


def check_trace(spans: tuple[ReadableSpan, ...], agent_id: str) -> None:
    query = by_name(spans, "query")
    tool = by_name(spans, f"tool {agent_id}.echo")
    agent = by_name(spans, "tool echo")
    work = by_name(spans, "agent work")
    llm_rounds = [s for s in spans if s.name == "llm gpt-4o-mini"]
    assert len(llm_rounds) == 2
    trace_id = query.context.trace_id
    # The query's trace starts at the request (FastAPI's own span when it traces, else ``query``).
    [root] = [s for s in spans if s.context.trace_id == trace_id and s.parent is None]
    assert root.name in ("POST /query", "query")
    assert {s.context.trace_id for s in (tool, agent, work, *llm_rounds)} == {trace_id}
    assert all(
        s.parent is not None and s.parent.span_id == query.context.span_id for s in (tool, *llm_rounds)
    )
    assert agent.parent is not None and agent.parent.span_id == tool.context.span_id
    assert work.parent is not None and work.parent.span_id == agent.context.span_id
    assert tool.attributes is not None and agent.attributes is not None
    assert tool.attributes["openagent.call_id"] == agent.attributes["openagent.call_id"]


async def test_invocation_agent_span_is_under_the_masters_tool_span(
    exporter: InMemorySpanExporter, llm: ScriptedOpenAIServer, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the agent reads .env from the working directory
    async with in_process_master(llm) as base_url:
        agent = InvocationActionAgent(
            "trace-http",
            [ECHO],
            tool_handler=handler,
            host="127.0.0.1",
            port=0,
            master_base_url=base_url,
            api_key="",
            unregister_on_stop=True,  # the test database is shared: leave no agent behind
        )
        async with agent:
            llm.add_tool_call("trace-http__echo", {"n": 1})
            llm.add_text("done")
            async with httpx.AsyncClient(base_url=base_url, timeout=20) as http:
                body = (
                    await http.post("/query", json={"query": "go", "allowed_agent_ids": ["trace-http"]})
                ).json()
    assert body["success"] is True, body
    check_trace(exporter.get_finished_spans(), "trace-http")


async def test_websocket_agent_span_is_under_the_masters_tool_span(
    exporter: InMemorySpanExporter, llm: ScriptedOpenAIServer
) -> None:
    async with in_process_master(llm) as base_url:
        config = ClientConfig(master_ws=base_url.replace("http://", "ws://") + "/ws", api_key="")
        async with OrchestratorActionAgent("trace-ws", [ECHO], handler, config=config):
            llm.add_tool_call("trace-ws__echo", {"n": 2})
            llm.add_text("done")
            async with httpx.AsyncClient(base_url=base_url, timeout=20) as http:
                body = (
                    await http.post("/query", json={"query": "go", "allowed_agent_ids": ["trace-ws"]})
                ).json()
    assert body["success"] is True, body
    check_trace(exporter.get_finished_spans(), "trace-ws")


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"otel_traces_exporter": "otlp"}, True),
        ({"otel_traces_exporter": "none", "otel_exporter_otlp_endpoint": "http://127.0.0.1:4318"}, False),
        ({"otel_exporter_otlp_endpoint": "http://127.0.0.1:4318"}, True),
        ({"otel_exporter_otlp_traces_endpoint": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"otel_traces_exporter": "console", "otel_sdk_disabled": True}, False),
    ],
)
def test_tracing_is_off_unless_the_otel_variables_ask(env: dict[str, Any], on: bool) -> None:
    assert tracing.enabled(Settings(_env_file=None, **env)) is on  # type: ignore[call-arg]
