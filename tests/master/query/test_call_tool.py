"""Direct tool calls through the query entry (what MCP ``tools/call`` and A2A tool messages use):
checked before sending, admitted like a query, counted like the orchestrator's calls."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from master.agents.directory import AgentDirectory
from master.agents.dispatch import Dispatcher
from master.agents.registry import Registry
from master.agents.tool_calls import ToolCaller
from master.auth import SYSTEM
from master.observability.metrics import Metrics
from master.query.admission import Admission
from master.query.entry import QueryEntry, ToolRefused
from master.query.events import QueryRefused
from master.query.policy import ApprovalPolicy
from protocol import ErrorCode, ToolProgress
from tests.factories import answering_agent, dispatcher_for_tests, master_settings

ADD = {
    "name": "add",
    "description": "Add two numbers",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    "annotations": {"readOnlyHint": True},
}


def _entry(
    dispatcher: Dispatcher, registry: Registry, limit: int = 4, metrics: Metrics | None = None
) -> QueryEntry:
    agents = AgentDirectory(registry, dispatcher._invocation)
    queries = SimpleNamespace(policy=ApprovalPolicy(master_settings(), can_wait=False))  # no approvals kept
    return QueryEntry(
        queries,  # type: ignore[arg-type]  # no query runs here, nothing can wait
        Admission(limit),
        agents=agents,
        tools=ToolCaller(dispatcher, metrics),
    )


def _answer(tool: str, arguments: dict[str, Any]) -> Any:
    if tool == "add":
        return arguments["a"] + arguments["b"]
    raise AssertionError(tool)


async def test_offered_tools_are_named_as_the_orchestrator_names_them() -> None:
    async with dispatcher_for_tests() as dispatcher:
        registry = Registry()
        registry.add(answering_agent(dispatcher, "calc", [ADD], _answer))
        [tool] = _entry(dispatcher, registry).offered_tools(principal=SYSTEM)
    assert (tool.name, tool.agent_id, tool.tool_name) == ("calc__add", "calc", "add")
    assert tool.parameters == ADD["parameters"]
    assert tool.annotations == {"readOnlyHint": True}


async def test_a_direct_call_goes_through_dispatch_and_is_counted() -> None:
    metrics = Metrics()
    async with dispatcher_for_tests() as dispatcher:
        registry = Registry()
        registry.add(answering_agent(dispatcher, "calc", [ADD], _answer))
        entry = _entry(dispatcher, registry, metrics=metrics)
        run = await entry.call_tool("calc", "add", {"a": 2, "b": 3}, door="mcp", principal=SYSTEM)
        assert entry.admission.in_flight == 0
    assert (run.success, run.result, run.agent_id, run.tool_name) == (True, 5, "calc", "add")
    assert metrics.tool_calls.labels("calc", "add", "success")._value.get() == 1


@pytest.mark.parametrize(
    ("agent_id", "tool", "arguments", "code", "named"),
    [
        ("nobody", "add", {"a": 1, "b": 2}, ErrorCode.UNKNOWN_AGENT, "'nobody'"),
        ("calc", "mul", {"a": 1, "b": 2}, ErrorCode.UNKNOWN_TOOL, "'mul'"),
        ("calc", "add", {"a": 1}, ErrorCode.INVALID_ARGUMENTS, '"b" is a required property'),
        ("calc", "add", {"a": "x", "b": 1}, ErrorCode.INVALID_ARGUMENTS, "a: "),
    ],
)
async def test_a_refused_call_names_the_problem_and_sends_nothing(
    agent_id: str, tool: str, arguments: dict[str, Any], code: ErrorCode, named: str
) -> None:
    sent: list[Any] = []
    async with dispatcher_for_tests() as dispatcher:
        registry = Registry()
        registry.add(answering_agent(dispatcher, "calc", [ADD], _answer, calls=sent))
        entry = _entry(dispatcher, registry)
        with pytest.raises(ToolRefused) as refused:
            await entry.call_tool(agent_id, tool, arguments, door="a2a", principal=SYSTEM)
        assert entry.admission.in_flight == 0
    assert refused.value.code == code and named in refused.value.message
    assert sent == []


async def test_without_approvals_kept_a_call_that_needs_one_is_refused_not_sent() -> None:
    """Fail closed: a master with nowhere to keep a held call never runs it undecided."""
    sent: list[Any] = []
    async with dispatcher_for_tests() as dispatcher:
        registry = Registry()
        guarded = {**ADD, "requires_approval": True}
        registry.add(answering_agent(dispatcher, "calc", [guarded], _answer, calls=sent))
        entry = _entry(dispatcher, registry)
        with pytest.raises(ToolRefused) as refused:
            await entry.call_tool("calc", "add", {"a": 1, "b": 2}, door="mcp", principal=SYSTEM)
        assert entry.admission.in_flight == 0
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert "requires a person's approval" in refused.value.message and sent == []


async def test_a_full_master_refuses_before_sending() -> None:
    sent: list[Any] = []
    async with dispatcher_for_tests() as dispatcher:
        registry = Registry()
        registry.add(answering_agent(dispatcher, "calc", [ADD], _answer, calls=sent))
        entry = _entry(dispatcher, registry, limit=0)
        with pytest.raises(QueryRefused) as refused:
            await entry.call_tool("calc", "add", {"a": 1, "b": 2}, door="mcp", principal=SYSTEM)
    assert refused.value.code == ErrorCode.TOO_MANY_QUERIES and sent == []


async def test_a_failed_tool_is_a_run_with_its_error_and_cancelling_abandons_the_call() -> None:
    progress: list[ToolProgress] = []
    async with dispatcher_for_tests(call_timeout=60) as dispatcher:
        registry = Registry()
        registry.add(answering_agent(dispatcher, "calc", [ADD]))  # never answers
        entry = _entry(dispatcher, registry)
        call = asyncio.create_task(
            entry.call_tool(
                "calc", "add", {"a": 1, "b": 2}, door="mcp", on_progress=progress.append, principal=SYSTEM
            )
        )
        async with asyncio.timeout(30):
            while dispatcher.in_flight == 0:
                await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert dispatcher.in_flight == 0 and entry.admission.in_flight == 0
        dispatcher.refusal = "the master is draining"
        run = await entry.call_tool("calc", "add", {"a": 1, "b": 2}, door="mcp", principal=SYSTEM)
    assert run.success is False and "draining" in (run.error or "")
