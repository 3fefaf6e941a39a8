"""Registration checks: tool limits, function-name collisions, the invocation id rule."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from master.agents.catalog import ToolCatalog, ToolLimits
from master.agents.directory import AgentDirectory
from master.agents.invocation import InvocationAgents
from master.agents.registry import LiveAgent, Registry
from master.errors import RegistrationRefused
from protocol import Register, ToolSchema
from tests.factories import MasterProcess, RawPeer

ECHO = ToolSchema(name="echo")


async def _noop(*args: Any) -> None:
    return None


def _catalog(limits: ToolLimits, *live: tuple[str, list[ToolSchema]]) -> ToolCatalog:
    registry = Registry()
    for agent_id, tools in live:
        registry.add(
            LiveAgent.from_register(Register(agent_id=agent_id, role="action", tools=tools), _noop, _noop)
        )
    invocation = InvocationAgents(None, None, ttl_seconds=1, health_timeout=1)  # type: ignore[arg-type]
    return ToolCatalog(AgentDirectory(registry, invocation), limits)


def _refusal(catalog: ToolCatalog, agent_id: str, tools: list[ToolSchema], invocation: bool = False) -> str:
    with pytest.raises(RegistrationRefused) as info:
        catalog.check(agent_id, tools, invocation=invocation, metadata={})
    return f"{info.value.code}: {info.value.message}"


def test_limits_are_named_when_exceeded() -> None:
    """Defect 9: schema size, tools per agent and the whole catalog are capped."""
    limits = ToolLimits(schema_bytes=1000, tools_per_agent=3, catalog_tools=5)
    catalog = _catalog(limits, ("big", [ToolSchema(name=f"t{n}") for n in range(3)]))
    huge = ToolSchema(name="huge", description="x" * 1000)
    assert "OPENAGENT_MAX_TOOL_SCHEMA_BYTES=1000" in _refusal(catalog, "a", [huge])
    assert "OPENAGENT_MAX_TOOLS_PER_AGENT=3" in _refusal(
        catalog, "a", [ToolSchema(name=f"t{n}") for n in range(4)]
    )
    three = [ToolSchema(name=f"t{n}") for n in range(3)]
    assert _refusal(catalog, "a", three).startswith("limit_exceeded: agent 'a' would bring the catalog to 6")
    catalog.check("a", three[:2], invocation=False, metadata={})
    catalog.check("big", three, invocation=False, metadata={})  # re-registering replaces its own tools


def test_colliding_function_names_are_refused_naming_the_other_agent() -> None:
    """Defect 11: ``sq.a`` and ``sq_a`` map to the same function names; the second is refused."""
    catalog = _catalog(ToolLimits(), ("sq_a", [ECHO]))
    refusal = _refusal(catalog, "sq.a", [ECHO])
    assert refusal.startswith("agent_conflict:") and "'sq_a__echo'" in refusal and "agent 'sq_a'" in refusal
    catalog.check("sq_a", [ECHO], invocation=False, metadata={})  # the genuine agent reconnects


def test_an_invocation_agent_may_not_take_a_live_websocket_agents_id() -> None:
    """Defect 12: the same rule for POST /register and the legacy WebSocket register."""
    catalog = _catalog(ToolLimits(), ("live", [ECHO]))
    assert _refusal(catalog, "live", [ECHO], invocation=True).startswith(
        "agent_conflict: agent 'live' is connected"
    )
    catalog.check("live", [ECHO], invocation=False, metadata={})  # over WebSocket, the newest connection wins


def test_the_catalog_follows_agents_that_connect_reconnect_and_leave() -> None:
    """The live agents' names are kept up to date by the registry's events (no rebuild per check)."""
    registry = Registry()
    invocation = InvocationAgents(None, None, ttl_seconds=1, health_timeout=1)  # type: ignore[arg-type]
    catalog = ToolCatalog(AgentDirectory(registry, invocation), ToolLimits(catalog_tools=3))

    def connect(agent_id: str, *names: str) -> LiveAgent:
        agent = LiveAgent.from_register(
            Register(agent_id=agent_id, role="action", tools=[ToolSchema(name=n) for n in names]),
            _noop,
            _noop,
        )
        registry.add(agent)
        return agent

    first = connect("sq_a", "echo", "ping")
    assert _refusal(catalog, "sq.a", [ECHO]).startswith("agent_conflict:")
    assert "catalog to 4" in _refusal(catalog, "other", [ToolSchema(name="a"), ToolSchema(name="b")])
    connect("sq_a", "ping")  # a newer connection with fewer tools replaces the first
    catalog.check("sq.a", [ECHO], invocation=False, metadata={})  # 'sq_a__echo' is free again
    assert not registry.remove(first)  # the replaced connection leaving changes nothing
    assert "catalog to 4" in _refusal(catalog, "other", [ToolSchema(name=n) for n in "abc"])
    registry.remove(registry.get("sq_a"))  # type: ignore[arg-type]
    catalog.check("other", [ToolSchema(name=n) for n in "abc"], invocation=False, metadata={})


async def test_registration_paths_refuse_with_the_limit_or_the_other_agent(master: MasterProcess) -> None:
    genuine = await RawPeer.connect(master.ws_url)
    impostor = await RawPeer.connect(master.ws_url)
    try:
        await genuine.register("squat_me", tools=[{"name": "echo"}])
        await impostor.send(
            {"type": "register", "agent_id": "squat.me", "role": "action", "tools": [{"name": "echo"}]}
        )
        reply = await impostor.recv()
        assert (reply["type"], reply["code"], reply["ref"]) == ("error", "agent_conflict", "squat.me")
        assert "agent 'squat_me'" in reply["message"]
        body = {
            "agent_id": "squat.me",
            "invocation_base_url": "http://127.0.0.1:9",
            "tools": [{"name": "echo"}],
        }
        async with httpx.AsyncClient(base_url=master.base_url, timeout=10) as http:
            response = await http.post("/register", json=body)
            assert response.status_code == 409 and "squat_me" in response.json()["detail"]
            huge = {**body, "agent_id": "huge-tool", "tools": [{"name": "t", "description": "x" * 20_000}]}
            response = await http.post("/register", json=huge)
            assert response.status_code == 422 and "OPENAGENT_MAX_TOOL_SCHEMA_BYTES" in response.text
        many = [{"name": f"t{n}"} for n in range(65)]
        await impostor.send({"type": "register", "agent_id": "many-tools", "role": "action", "tools": many})
        reply = await impostor.recv()
        assert reply["code"] == "limit_exceeded" and "OPENAGENT_MAX_TOOLS_PER_AGENT=64" in reply["message"]
    finally:
        await genuine.close()
        await impostor.close()
