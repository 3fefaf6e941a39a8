"""One directory of every agent the master can reach, whatever the transport.

Three sources, merged here only:

- the :class:`~master.agents.registry.Registry`: WebSocket agents connected to this master;
- the :class:`~master.agents.invocation.InvocationAgents`: HTTP invocation agents, stored in Redis;
- with several masters (``OPENAGENT_CLUSTER=1``), the agents other masters hold
  (:class:`RemoteAgents`, implemented by :class:`~master.cluster.directory.ClusterDirectory`
  and passed in, so that this package never imports the cluster).

The rules of the merge: a live WebSocket agent shadows an agent of another master with the same
id, and both shadow an invocation agent with that id. An agent registered for one tenant
(``tenant`` on its entry) is offered to that tenant's queries only: the reads take the asker's
:class:`~master.auth.Scope` (required; every agent for an administrator's).

Who holds an agent id is decided by :attr:`AgentDirectory.ids` (:mod:`master.agents.identity`),
which falls back on this directory for agents no owner record names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from master.agents.dispatch import Target
from master.agents.identity import AgentIds, Owner
from master.agents.invocation import InvocationAgent, InvocationAgents
from master.agents.registry import LiveAgent, Registry, offered_to
from master.agents.remote import RemoteAgent
from master.auth import Scope, TenantRecords


class RemoteAgents(Protocol):
    """The agents of the other live masters (``master.cluster``)."""

    @property
    def master_id(self) -> str:
        """This master's id in the cluster."""

    def remote_agents(self, allowed: set[str] | None = None) -> list[RemoteAgent]:
        """Agents of other live masters, limited to ``allowed`` ids when given."""


class AgentDirectory(TenantRecords):
    """The registry, the invocation agents and the other masters' agents, as one list."""

    def __init__(
        self, registry: Registry, invocation: InvocationAgents, remote: RemoteAgents | None = None
    ) -> None:
        self.registry = registry
        self.invocation = invocation
        self.remote = remote
        self.ids = AgentIds(invocation.redis, ttl_seconds=invocation.ttl_seconds, known=self.known_owner)
        """Who holds each agent id: every registration and unregistration claims or releases through it."""

    def known_owner(self, agent_id: str) -> Owner | None:
        """The owner of ``agent_id`` as the agents known now show it: connected here, to another
        master, or stored for HTTP invocation (``None``: no agent has it)."""
        live = self.registry.get(agent_id)
        if live is not None:
            return Owner.of_agent(live.tenant, live.role)
        if self.remote is not None:
            for remote in self.remote.remote_agents({agent_id}):
                return Owner.of_agent(remote.tenant, remote.role)
        stored = self.invocation.get(agent_id)
        return None if stored is None else Owner.of_agent(stored.tenant, "action")

    def tool_targets(self, scope: Scope, allowed: Iterable[str] | None = None) -> list[Target]:
        """The agents a query may call: connected WebSocket action agents with tools, then other
        masters' (called through them), then invocation agents not known to be DOWN; limited to
        ``allowed`` ids when given, and to the agents offered to ``scope`` (another tenant's
        agent does not shadow a shared one: it is not there for this asker)."""
        tenant = self._scoped("tool_targets", scope).tenant
        targets: list[Target] = list(self.registry.action_agents(allowed))
        if tenant is not None:
            targets = [agent for agent in targets if offered_to(agent.tenant, tenant)]
        ids = {agent.agent_id for agent in targets}
        wanted = None if allowed is None else set(allowed)
        if self.remote is not None:
            for remote in self.remote.remote_agents(wanted):
                if (
                    remote.agent_id not in ids
                    and remote.role == "action"
                    and remote.tools
                    and offered_to(remote.tenant, tenant)
                ):
                    targets.append(remote)
                    ids.add(remote.agent_id)
        for agent in self.invocation.available(wanted):
            if agent.agent_id not in ids and offered_to(agent.tenant, tenant):
                targets.append(agent)
        return targets

    def local_agents(self, role: str | None = None) -> list[LiveAgent | InvocationAgent]:
        """This master's own agents: connected WebSocket agents (of ``role`` when given), then the
        invocation agents whose id none of those has."""
        agents: list[LiveAgent | InvocationAgent] = [
            agent for agent in self.registry.all() if role is None or agent.role == role
        ]
        live = {agent.agent_id for agent in agents}
        agents += [agent for agent in self.invocation.all() if agent.agent_id not in live]
        return agents

    def rows(self, scope: Scope) -> list[dict[str, Any]]:
        """Every agent's row in ``GET /agents``: connected WebSocket agents, other masters' (with
        several masters, every row names the master holding the agent), then invocation agents
        with their last health check; only those offered to ``scope``."""
        tenant = self._scoped("rows", scope).tenant
        rows = [agent.describe() for agent in self.registry.all() if offered_to(agent.tenant, tenant)]
        if self.remote is not None:
            for row in rows:
                row["master_id"] = self.remote.master_id
            local = {row["agent_id"] for row in rows}
            rows += [
                agent.describe()
                for agent in self.remote.remote_agents()
                if agent.agent_id not in local and offered_to(agent.tenant, tenant)
            ]
        live = {row["agent_id"] for row in rows}
        rows += [
            agent.describe()
            for agent in self.invocation.all()
            if agent.agent_id not in live and offered_to(agent.tenant, tenant)
        ]
        return rows

    def known_ids(self, scope: Scope, wanted: Iterable[str] | None = None) -> set[str]:
        """The ids of every agent any source knows (connected here or to another master, or
        registered for HTTP invocation, up or down); only among ``wanted`` when given, and only
        those offered to ``scope``."""
        tenant = self._scoped("known_ids", scope).tenant
        wanted_set = None if wanted is None else set(wanted)
        registry: Iterable[LiveAgent | InvocationAgent]
        invocation: Iterable[LiveAgent | InvocationAgent]
        if wanted_set is None:
            registry, invocation = self.registry.all(), self.invocation.all()
        else:  # looked up by id: the cost of a query that names its agents does not grow with them
            registry = [agent for agent in map(self.registry.get, wanted_set) if agent is not None]
            invocation = [agent for agent in map(self.invocation.get, wanted_set) if agent is not None]
        known = {agent.agent_id for agent in registry if offered_to(agent.tenant, tenant)}
        known.update(agent.agent_id for agent in invocation if offered_to(agent.tenant, tenant))
        if self.remote is not None:
            known.update(
                agent.agent_id
                for agent in self.remote.remote_agents(wanted_set)
                if offered_to(agent.tenant, tenant)
            )
        return known

    def counts(self) -> dict[str, int]:
        """How many agents this master serves, by transport (``websocket``, ``http``)."""
        return {"websocket": len(self.registry.all()), "http": len(self.invocation.all())}
