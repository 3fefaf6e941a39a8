"""The agent directory: the registry, the invocation agents and other masters' agents as one list."""

from __future__ import annotations

from typing import Any

from master.agents.directory import AgentDirectory
from master.agents.invocation import InvocationAgent, InvocationAgents
from master.agents.registry import LiveAgent, Registry, compile_tools
from master.agents.remote import RemoteAgent
from master.auth import Scope
from protocol import Register, ToolSchema
from tests.factories import EVERY_TENANT

ECHO = ToolSchema(name="echo")


async def _noop(*args: Any) -> None:
    return None


class _OtherMasters:
    """Stands in for the cluster directory (the :class:`RemoteAgents` protocol)."""

    master_id = "master-here"

    def __init__(self, *agents: RemoteAgent) -> None:
        self.agents = list(agents)

    def remote_agents(self, allowed: set[str] | None = None) -> list[RemoteAgent]:
        return [agent for agent in self.agents if allowed is None or agent.agent_id in allowed]


def _live(agent_id: str, role: str = "action") -> LiveAgent:
    tools = [ECHO] if role == "action" else []
    return LiveAgent.from_register(Register(agent_id=agent_id, role=role, tools=tools), _noop, _noop)  # type: ignore[arg-type]


def _remote(agent_id: str, role: str = "action") -> RemoteAgent:
    return RemoteAgent(
        agent_id, "master-there", role, {}, compile_tools(agent_id, [ECHO]), 1.0, {"tools": []}
    )


def _invocation(agent_id: str, status: str = "UP") -> InvocationAgent:
    agent = InvocationAgent(agent_id, "http://127.0.0.1:9", compile_tools(agent_id, [ECHO]), {}, 1.0)
    agent.status = status  # type: ignore[assignment]
    return agent


def _directory(
    live: list[LiveAgent], invocation: list[InvocationAgent], remote: _OtherMasters | None = None
) -> AgentDirectory:
    registry = Registry()
    for agent in live:
        registry.add(agent)
    agents = InvocationAgents(None, None, ttl_seconds=1, health_timeout=1)  # type: ignore[arg-type]
    for agent in invocation:
        agents._agents[agent.agent_id] = agent
    return AgentDirectory(registry, agents, remote)


def test_tool_targets_put_live_agents_first_and_shadow_the_same_id_below() -> None:
    directory = _directory(
        [_live("ws"), _live("asker", role="query")],
        [_invocation("ws"), _invocation("http"), _invocation("down", status="DOWN"), _invocation("far")],
        _OtherMasters(_remote("far"), _remote("ws"), _remote("far-asker", role="query")),
    )
    targets = directory.tool_targets(EVERY_TENANT)
    assert [(type(t).__name__, t.agent_id) for t in targets] == [
        ("LiveAgent", "ws"),
        ("RemoteAgent", "far"),
        ("InvocationAgent", "http"),
    ]
    assert [t.agent_id for t in directory.tool_targets(EVERY_TENANT, ["far", "http", "asker"])] == [
        "far",
        "http",
    ]


def test_rows_name_the_master_holding_each_agent_with_several_masters() -> None:
    alone = _directory([_live("ws")], [_invocation("http")])
    assert [(row["agent_id"], "master_id" in row) for row in alone.rows(EVERY_TENANT)] == [
        ("ws", False),
        ("http", False),
    ]
    several = _directory(
        [_live("ws")], [_invocation("http"), _invocation("far")], _OtherMasters(_remote("far"))
    )
    assert [(row["agent_id"], row.get("master_id")) for row in several.rows(EVERY_TENANT)] == [
        ("ws", "master-here"),
        ("far", "master-there"),
        ("http", None),
    ]


def test_local_agents_and_counts_leave_other_masters_out() -> None:
    directory = _directory(
        [_live("ws"), _live("asker", role="query")],
        [_invocation("ws"), _invocation("http")],
        _OtherMasters(_remote("far")),
    )
    assert [agent.agent_id for agent in directory.local_agents()] == ["ws", "asker", "http"]
    assert [agent.agent_id for agent in directory.local_agents(role="action")] == ["ws", "http"]
    assert directory.counts() == {"websocket": 2, "http": 2}


def test_named_agents_are_looked_up_by_id_among_many() -> None:
    """A query that names its agents gets exactly the ones a walk over every agent would give
    (connected, other masters', invocation agents not DOWN, offered to its tenant), in the order it
    named them, each once: found by id, so its cost does not grow with the agents connected."""
    live = [_live(f"ws-{n}") for n in range(2000)] + [_live("ws-query", role="query")]
    live[7].tenant = "team-b"
    invocation = [_invocation(f"http-{n}") for n in range(50)] + [_invocation("http-down", status="DOWN")]
    directory = _directory(live, invocation, _OtherMasters(_remote("remote-1")))
    named = ["http-3", "ws-1999", "remote-1", "ws-7", "ws-query", "http-down", "nobody", "ws-1999"]

    assert [t.agent_id for t in directory.tool_targets(EVERY_TENANT, named)] == [
        "ws-1999",
        "ws-7",
        "remote-1",
        "http-3",
    ]
    assert [t.agent_id for t in directory.tool_targets(Scope.for_tenant("team-a"), named)] == [
        "ws-1999",
        "remote-1",
        "http-3",
    ]
    assert directory.known_ids(EVERY_TENANT, named) == {
        "http-3",
        "ws-1999",
        "remote-1",
        "ws-7",
        "ws-query",
        "http-down",
    }
    assert directory.known_ids(Scope.for_tenant("team-a"), named) == {
        "http-3",
        "ws-1999",
        "remote-1",
        "ws-query",
        "http-down",
    }
    everything = directory.known_ids(EVERY_TENANT)
    assert len(everything) == 2000 + 1 + 51 + 1 and directory.known_ids(EVERY_TENANT, named) <= everything
