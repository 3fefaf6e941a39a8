"""The live-agent registry: which agents are connected over WebSocket right now.

In memory only: a WebSocket agent exists while its connection does. Several connections may
serve one ``agent_id`` as its *replicas*, told apart by the ``instance`` of their ``register``
frame: calls are balanced over them (least in flight first, :meth:`LiveAgent.pick`). When a
connection registers an ``agent_id`` and ``instance`` that are live, the newest wins: the
registry returns the previous connection so the hub can tell it and close it. Whether a
connection may take the id at all is decided before, once, by
:class:`master.agents.identity.AgentIds`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import jsonschema_rs
from jsonschema_rs import Draft202012Validator

from master.errors import InvalidToolSchema
from master.storage.caches import SizedLRU
from protocol import Register, Role, ToolSchema

SendFrame = Callable[[str], Awaitable[None]]


@dataclass(eq=False)
class AgentTool:
    """One tool of a live agent, with its compiled argument validator (JSON Schema draft 2020-12)."""

    schema: ToolSchema
    validator: Draft202012Validator
    _token_costs: dict[str, int] = field(default_factory=dict, repr=False)

    def token_cost(self, definition: dict[str, Any], count: Callable[[dict[str, Any]], int]) -> int:
        """``count(definition)``, memoized per function name: the prompt tokens of this tool's
        OpenAI definition (the counter comes from the caller, so agents know nothing of tokenizers)."""
        name = definition["function"]["name"]
        cost = self._token_costs.get(name)
        if cost is None:
            cost = self._token_costs[name] = count(definition)
        return cost

    @classmethod
    def compile(cls, agent_id: str, schema: ToolSchema) -> AgentTool:
        try:
            validator = _validator(json.dumps(schema.parameters, sort_keys=True))
        except jsonschema_rs.ValidationError as exc:
            raise InvalidToolSchema(
                f"tool {schema.name!r} of agent {agent_id!r} has an invalid parameters schema: "
                f"{str(exc).splitlines()[0]}"
            ) from exc
        return cls(schema, validator)

    def validate(self, arguments: dict[str, Any]) -> list[str]:
        """Problems with ``arguments``, each naming the offending field; empty when valid."""
        problems: list[str] = []
        if self.validator.is_valid(arguments):
            return problems
        for error in sorted(
            self.validator.iter_errors(arguments), key=lambda e: list(map(str, e.instance_path))
        ):
            where = "/".join(str(p) for p in error.instance_path) or "(root)"
            problems.append(f"{where}: {error.message}")
        return problems


_validators: SizedLRU[str, Draft202012Validator] = SizedLRU(
    8 * 1024 * 1024, lambda parameters, _: len(parameters) + 256, max_entries=1024
)


def _validator(parameters: str) -> Draft202012Validator:
    """A validator per distinct schema (checked against the meta-schema when built); many agents
    (replicas, reconnects) share tools. jsonschema-rs: ~50x faster per call than python-jsonschema.
    Cached by size (8 MB of schema text), so large distinct schemas cannot pile up."""
    validator = _validators.get(parameters)
    if validator is None:
        validator = Draft202012Validator(json.loads(parameters), retriever=_no_remote_refs)
        _validators.put(parameters, validator)
    return validator


def _no_remote_refs(uri: str) -> Any:
    """Agents' schemas may not make the master fetch URLs (``$ref`` to a remote document)."""
    raise ValueError(f"remote $ref {uri!r} is not allowed in tool schemas")


def compile_tools(agent_id: str, tools: Sequence[ToolSchema]) -> dict[str, AgentTool]:
    """Tools by name, each schema checked and compiled (raises :class:`InvalidToolSchema`)."""
    names = [tool.name for tool in tools]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InvalidToolSchema(f"agent {agent_id!r} declares tool {duplicates[0]!r} twice")
    return {tool.name: AgentTool.compile(agent_id, tool) for tool in tools}


@dataclass(eq=False)
class LiveAgent:
    """A registered WebSocket connection."""

    agent_id: str
    role: Role
    metadata: dict[str, Any]
    tools: dict[str, AgentTool]
    send: SendFrame
    close: Callable[[int, str], Awaitable[None]]
    connected_at: float = field(default_factory=time.time)
    tenant: str | None = None
    """The tenant whose queries it serves (registered with that tenant's ``agent`` key); ``None``:
    shared with every tenant (:func:`offered_to`)."""
    key_id: str | None = None
    """The key it connected with: a newer connection of the same key is a second copy of it."""
    instance: str | None = None
    """Which replica of the agent this connection is (``None`` is an instance name too)."""
    in_flight: int = 0
    """Calls sent to this connection and not settled yet (the dispatcher counts them)."""
    group: list[LiveAgent] = field(default_factory=list, repr=False)
    """Every live replica of the agent id (shared with the registry; a connection that left keeps
    it, so that a call aimed at it goes to a live replica)."""

    def pick(self) -> LiveAgent:
        """The replica of this agent that takes the next call: the one with the fewest calls in
        flight (the first registered on a tie); this connection when it is no longer live."""
        return min(self.group, key=_load) if self.group else self

    @classmethod
    def from_register(
        cls,
        message: Register,
        send: SendFrame,
        close: Callable[[int, str], Awaitable[None]],
        tenant: str | None = None,
        key_id: str | None = None,
    ) -> LiveAgent:
        """Build the entry, compiling every tool's schema (raises :class:`InvalidToolSchema`)."""
        tools = compile_tools(message.agent_id, message.tools)
        return cls(
            message.agent_id,
            message.role,
            dict(message.metadata),
            tools,
            send,
            close,
            tenant=tenant,
            key_id=key_id,
            instance=message.instance,
        )

    def describe(self) -> dict[str, Any]:
        """The agent's row in ``GET /agents``."""
        return {
            "agent_id": self.agent_id,
            "role": self.role,
            "connection_type": "websocket",
            "status": "online",
            "connected_at": self.connected_at,
            "metadata": self.metadata,
            "tools": [tool.schema.model_dump(exclude_none=True) for tool in self.tools.values()],
            **({"tenant": self.tenant} if self.tenant is not None else {}),
            "replicas": [
                {
                    "instance": replica.instance,
                    "connected_at": replica.connected_at,
                    "in_flight": replica.in_flight,
                }
                for replica in self.group or [self]
            ],
        }

    def same_offer(self, other: LiveAgent) -> bool:
        """Whether ``other`` offers exactly the tools of this connection (replicas must)."""
        return {name: tool.schema for name, tool in self.tools.items()} == {
            name: tool.schema for name, tool in other.tools.items()
        }


def _load(agent: LiveAgent) -> int:
    return agent.in_flight


class Registry:
    """Live WebSocket agents by ``agent_id``: each id's first replica (:meth:`get`), and all its
    replicas (:meth:`replicas`)."""

    def __init__(self) -> None:
        self._agents: dict[str, LiveAgent] = {}
        self._waiters: dict[str, list[asyncio.Future[LiveAgent]]] = {}
        self.listeners: list[Callable[[str, LiveAgent], None]] = []
        """Told ``("added" | "removed", agent)`` (the cluster directory publishes them)."""

    def add(self, agent: LiveAgent) -> LiveAgent | None:
        """Register ``agent``, a new replica of its id unless a live connection has its
        ``instance``; return that connection, which it replaces, if any."""
        current = self._agents.get(agent.agent_id)
        group = current.group if current is not None else []
        previous = next((replica for replica in group if replica.instance == agent.instance), None)
        if previous is not None:
            group[group.index(previous)] = agent
        else:
            group.append(agent)
        agent.group = group
        self._agents[agent.agent_id] = group[0]
        if current is not None and previous is None:
            return None  # one more replica: the id's listing and owners do not change
        for waiter in self._waiters.pop(agent.agent_id, []):
            if not waiter.done():
                waiter.set_result(agent)
        for listener in self.listeners:
            listener("added", agent)
        return previous

    async def wait_for(self, agent_id: str) -> LiveAgent:
        """The agent once it is connected (at once if it is); bound it with a timeout."""
        live = self._agents.get(agent_id)
        if live is not None:
            return live
        waiter: asyncio.Future[LiveAgent] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(agent_id, []).append(waiter)
        try:
            return await waiter
        finally:
            waiters = self._waiters.get(agent_id, [])
            if waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[agent_id]

    def remove(self, agent: LiveAgent) -> bool:
        """Forget ``agent`` if it is still a live replica of its id (the listeners hear of it
        when it was the last one)."""
        group = agent.group
        if agent not in group:
            return False
        group.remove(agent)  # it keeps the list: a call still aimed at it picks a live replica
        if group:
            self._agents[agent.agent_id] = group[0]
            return True
        del self._agents[agent.agent_id]
        for listener in self.listeners:
            listener("removed", agent)
        return True

    def get(self, agent_id: str) -> LiveAgent | None:
        """The first live replica of ``agent_id`` (calls go to :meth:`LiveAgent.pick`)."""
        return self._agents.get(agent_id)

    def replicas(self, agent_id: str) -> list[LiveAgent]:
        """Every live replica of ``agent_id``, oldest first."""
        live = self._agents.get(agent_id)
        return list(live.group) if live is not None else []

    def all(self) -> list[LiveAgent]:
        return list(self._agents.values())

    def action_agents(self, allowed: Iterable[str] | None = None) -> list[LiveAgent]:
        """Connected action agents with tools, limited to ``allowed`` ids when given (looked up by
        id, in ``allowed``'s order: a query's cost does not grow with the agents connected)."""
        found = self._agents.values() if allowed is None else lookup(self._agents, allowed)
        return [agent for agent in found if agent.role == "action" and agent.tools]


_Agent = TypeVar("_Agent")


def lookup(agents: dict[str, _Agent], ids: Iterable[str]) -> list[_Agent]:
    """The agents of ``ids`` that ``agents`` (by id) holds, in ``ids``' order, each once: a query
    that names its agents costs the same with ten agents connected or ten thousand."""
    return [agent for agent in map(agents.get, dict.fromkeys(ids)) if agent is not None]


def offered_to(agent_tenant: str | None, tenant: str | None) -> bool:
    """Whether an agent of ``agent_tenant`` (``None``: shared) serves the queries of ``tenant``
    (``None``: an administrator, who reaches every agent)."""
    return agent_tenant is None or tenant is None or agent_tenant == tenant
