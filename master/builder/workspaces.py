"""Workspaces on the master: export what it runs, restore HTTP agents, run YAML agents in child processes.

- :meth:`Workspaces.export` snapshots the master: its URLs, the connected WebSocket action
  agents (with the handler of those the YAML runner started), the invocation agents from
  Redis, each linked to the orchestrator, and the canvas layout of the last workspace it
  was given (new nodes get positions in a column). The YAML is stable and secret-free
  (:func:`openagent.workspace.export_workspace`).
- :meth:`Workspaces.restore` registers the workspace's invocation agents, MCP servers and A2A
  agents exactly as ``POST /register`` does (stored in Redis, health-checked once; the header
  references resolved from the request's ``secrets``) and answers per agent:
  ``registered`` (UP), ``unreachable`` (stored, but ``/health`` failed; the background check
  brings it back), ``invalid`` (with the reason) or ``skipped`` (WebSocket agents). Each id is
  claimed for the restoring principal as any registration's is (:mod:`master.agents.identity`).
- :meth:`Workspaces.start` / :meth:`Workspaces.stop` run WebSocket agents from their handler
  modules, each in a supervised child process (:class:`openagent.workspace.processes.ProcessAgentRunner`),
  connected over loopback: their code cannot take the master down. Each gets a key of its own
  (:class:`~master.builder.credentials.AgentKeys`), never the master's.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from master.agents.catalog import ToolCatalog
from master.agents.connectors import Discovered
from master.agents.directory import AgentDirectory
from master.agents.identity import Claim
from master.agents.registrations import InvocationRegistration
from master.agents.registry import LiveAgent
from master.auth import Principal
from master.builder.credentials import AgentKeys
from master.builder.yaml_records import YamlAgentRecords
from master.errors import InvalidToolSchema, RegistrationRefused
from master.settings import Settings
from openagent.config import ClientConfig
from openagent.workspace import (
    ORCHESTRATOR_NODE,
    AgentOutcome,
    AgentSpec,
    Layout,
    Link,
    MasterUrls,
    Position,
    ToolSpec,
    Workspace,
    export_workspace,
)
from openagent.workspace.isolation import AgentLimits, Isolation
from openagent.workspace.processes import AgentCredential, ProcessAgentRunner
from openagent.workspace.schema import SECRET_REFERENCE
from protocol import ToolSchema

logger = logging.getLogger("master.builder.workspaces")

RestoreStatus = Literal["registered", "unreachable", "invalid", "skipped"]


@dataclass(frozen=True)
class RestoreOutcome:
    agent_id: str
    status: RestoreStatus
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"agent_id": self.agent_id, "status": self.status}
        if self.reason:
            row["reason"] = self.reason
        return row


async def _no_keys(agent_id: str) -> AgentCredential:
    raise RuntimeError("this master makes no agent keys (no key store), so it starts no agent code")


def ws_url_for(base_url: str) -> str:
    """``http://host:8000`` → ``ws://host:8000/ws``."""
    scheme, _, rest = base_url.rstrip("/").partition("://")
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/ws"


class Workspaces:
    """Export, restore and YAML-run workspaces on this master."""

    def __init__(
        self,
        settings: Settings,
        agents: AgentDirectory,
        root: Path,
        catalog: ToolCatalog | None = None,
        keys: AgentKeys | None = None,
        records: YamlAgentRecords | None = None,
    ) -> None:
        self.settings = settings
        self.records = records
        """The started agents, kept for a restart; ``None``: not kept (tests of export and restore)."""
        self.keys = keys
        """Makes each started agent's key; ``None`` (tests of export and restore): no agent is started."""
        self.catalog = catalog
        """The limits and function-name rules of ``POST /register``, applied to restored agents too."""
        self.agents = agents
        self.registry = agents.registry
        self.invocation = agents.invocation
        self.runner = ProcessAgentRunner(
            self._client_config(settings.master_base_url),
            root=root,
            is_connected=self._connected_elsewhere,
            isolation=isolation_of(settings),
        )
        self._layout = Layout()

    def _client_config(self, base_url: str) -> ClientConfig:
        return ClientConfig(
            master_ws=ws_url_for(base_url),
            api_key="",  # no key, never the master's (None would read OPENAGENT_API_KEY): each agent gets its own
            keepalive_interval=0,  # same process: no proxy to keep the socket alive through
            reconnect_max_delay=1.0,
        )

    def _connected_elsewhere(self, agent_id: str) -> bool:
        return self.registry.get(agent_id) is not None and agent_id not in self.runner.running()

    def _remember_layout(self, workspace: Workspace) -> None:
        nodes = {**self._layout.nodes, **workspace.layout.nodes}
        self._layout = Layout(nodes=nodes, viewport=workspace.layout.viewport or self._layout.viewport)

    # ------------------------------------------------------------------ running

    async def start(self, workspace: Workspace, loopback_port: int | None, tenant: str) -> list[AgentOutcome]:
        """Start the workspace's WebSocket agents, connected to this master over loopback, each
        with a key of role ``agent`` for its own id in ``tenant``: the starter's (an
        administrator's: ``default``), so the agent serves that tenant's queries only."""
        if loopback_port is not None:
            self.runner.config = self._client_config(f"http://127.0.0.1:{loopback_port}")
        self._remember_layout(workspace)
        outcomes = await self.runner.start(workspace, self.keys.issuer(tenant) if self.keys else _no_keys)
        if self.records is not None:
            running = {o.agent_id for o in outcomes if o.status in ("started", "already_running")}
            await self.records.save(
                [spec for spec in workspace.agents if spec.agent_id in running], tenant, loopback_port
            )
        return outcomes

    async def stop(self, agent_ids: Iterable[str] | None) -> list[AgentOutcome]:
        wanted = None if agent_ids is None else list(agent_ids)
        outcomes = await self.runner.stop(wanted)
        if self.records is not None:
            await self.records.forget(wanted)
        return outcomes

    async def resume(self) -> list[AgentOutcome]:
        """Start again the agents this master ran before it restarted (as they were started: same
        handler, tenant and loopback port), once this master answers on that port; per-agent
        outcomes, failures logged."""
        if self.records is None or not self.settings.openagent_yaml_runner:
            return []
        records = await self.records.load()
        groups: dict[tuple[str, int | None], list[AgentSpec]] = {}
        for record in records:
            groups.setdefault((record.tenant, record.port), []).append(record.spec)
        outcomes: list[AgentOutcome] = []
        for (tenant, port), specs in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1] or 0)):
            started = await self.start(Workspace(agents=specs), port, tenant)
            for outcome in started:
                if outcome.status == "failed":
                    logger.warning("YAML agent %s not started again: %s", outcome.agent_id, outcome.reason)
                else:
                    logger.info("YAML agent %s started again after a restart", outcome.agent_id)
            outcomes += started
        return outcomes

    async def aclose(self) -> None:
        await self.runner.aclose()

    # ------------------------------------------------------------------ restore

    async def restore(
        self,
        workspace: Workspace,
        *,
        principal: Principal,
        register_http: bool = True,
        secrets: Mapping[str, str] | None = None,
    ) -> list[RestoreOutcome]:
        """Register the workspace's invocation agents, MCP servers and A2A agents for
        ``principal`` (shared with every tenant when it is an administrator: registered agents
        follow the registration rule of :mod:`master.agents.identity`; agents the master
        *starts* instead belong to the starter's tenant, see :meth:`start`); raises
        ``SessionStoreUnavailable``.

        ``secrets`` holds the values of the ``${NAME}`` references in MCP and A2A agents' headers
        (never stored in the workspace; given by whoever restores it)."""
        self._remember_layout(workspace)
        outcomes = []
        for spec in sorted(workspace.agents, key=lambda agent: agent.agent_id):
            if spec.builtin or spec.role != "action":
                continue
            if spec.transport in ("mcp", "a2a"):
                if not register_http:
                    outcomes.append(RestoreOutcome(spec.agent_id, "skipped", "register_http is false"))
                else:
                    outcomes.append(await self._register_remote(spec, secrets or {}, principal))
                continue
            if spec.transport != "invocation":
                outcomes.append(
                    RestoreOutcome(
                        spec.agent_id,
                        "skipped",
                        "WebSocket agents connect themselves; start them with /internal/yaml-agents/start",
                    )
                )
                continue
            if not register_http:
                outcomes.append(RestoreOutcome(spec.agent_id, "skipped", "register_http is false"))
                continue
            outcomes.append(await self._register(spec, principal))
        return outcomes

    def _tenant(self, principal: Principal) -> str | None:
        return None if principal.is_admin else principal.tenant

    async def _register(self, spec: AgentSpec, principal: Principal) -> RestoreOutcome:
        if self.registry.get(spec.agent_id) is not None:
            return RestoreOutcome(spec.agent_id, "invalid", "an agent of this id is connected over WebSocket")
        try:
            registration = InvocationRegistration(
                agent_id=spec.agent_id,
                invocation_base_url=spec.invocation_base_url or "",
                tools=[ToolSchema.model_validate(tool.model_dump()) for tool in spec.tools],
                metadata=spec.metadata,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            return RestoreOutcome(spec.agent_id, "invalid", f"{where}: {first['msg']}")
        claim: Claim | None = None
        tenant = self._tenant(principal)
        try:
            if self.catalog is not None:
                self.catalog.check(
                    spec.agent_id, registration.tools, invocation=True, metadata=registration.metadata
                )
            claim = await self.agents.ids.claim(principal, spec.agent_id, "action", tenant=tenant)
            agent = await self.invocation.register(registration, registrant=principal, tenant=tenant)
        except (RegistrationRefused, InvalidToolSchema) as exc:
            if claim is not None:
                await self.agents.ids.undo(claim)
            return RestoreOutcome(
                spec.agent_id, "invalid", exc.message if isinstance(exc, RegistrationRefused) else str(exc)
            )
        if agent.status == "UP":
            return RestoreOutcome(spec.agent_id, "registered")
        return RestoreOutcome(
            spec.agent_id,
            "unreachable",
            f"{agent.base_url}/health failed: {agent.last_error or agent.status}; stored, and re-checked "
            "in the background",
        )

    async def _register_remote(
        self, spec: AgentSpec, secrets: Mapping[str, str], principal: Principal
    ) -> RestoreOutcome:
        """As ``POST /register`` with ``mcp_url`` or ``a2a_url``: list the agent's tools (an MCP
        server's, an A2A card's skills), check them, store it."""
        if self.registry.get(spec.agent_id) is not None:
            return RestoreOutcome(spec.agent_id, "invalid", "an agent of this id is connected over WebSocket")
        transport: Literal["mcp", "a2a"] = "a2a" if spec.transport == "a2a" else "mcp"
        field, references, url = (
            ("a2a_headers", spec.a2a_headers, spec.a2a_url or "")
            if transport == "a2a"
            else ("mcp_headers", spec.mcp_headers, spec.mcp_url or "")
        )
        headers = {}
        for name, reference in references.items():
            missing = [ref for ref in SECRET_REFERENCE.findall(reference) if ref not in secrets]
            if missing:
                return RestoreOutcome(
                    spec.agent_id,
                    "invalid",
                    f"{field}.{name} refers to ${{{missing[0]}}}, which was not given: set {missing[0]} "
                    "in the environment of 'openagent workspace restore'",
                )
            headers[name] = SECRET_REFERENCE.sub(lambda match: secrets[match.group(1)], reference)
        claim: Claim | None = None
        tenant = self._tenant(principal)
        try:
            await self.agents.ids.check(principal, spec.agent_id, "action", tenant=tenant)
            found = await self.invocation.discover(
                transport,
                url,
                headers,
                self.settings.openagent_remote_discovery_timeout,
                registrant=principal,
            )
            found = _guarded(found, spec)
            if self.catalog is not None:
                self.catalog.check(spec.agent_id, found.tools, invocation=True, metadata=found.metadata)
            claim = await self.agents.ids.claim(principal, spec.agent_id, "action", tenant=tenant)
            agent = await self.invocation.register_remote(
                transport, spec.agent_id, url, headers, found, tenant=tenant
            )
        except (RegistrationRefused, InvalidToolSchema) as exc:
            if claim is not None:
                await self.agents.ids.undo(claim)
            return RestoreOutcome(
                spec.agent_id, "invalid", exc.message if isinstance(exc, RegistrationRefused) else str(exc)
            )
        if agent.status == "UP":
            return RestoreOutcome(spec.agent_id, "registered")
        return RestoreOutcome(
            spec.agent_id, "unreachable", f"{url}: {agent.last_error or agent.status}; stored, and re-checked"
        )

    # ------------------------------------------------------------------ export

    def snapshot(self) -> Workspace:
        """The master's current workspace."""
        handlers = self.runner.running()
        agents: dict[str, AgentSpec] = {}
        for agent in self.agents.local_agents(role="action"):
            if isinstance(agent, LiveAgent):
                agents[agent.agent_id] = AgentSpec(
                    agent_id=agent.agent_id,
                    transport="websocket",
                    handler=handlers.get(agent.agent_id),
                    tools=[_tool(tool.schema) for tool in agent.tools.values()],
                    metadata=agent.metadata,
                )
            elif agent.transport in ("mcp", "a2a"):
                agents[agent.agent_id] = AgentSpec(
                    agent_id=agent.agent_id,
                    transport=agent.transport,
                    tools=[_tool(tool.schema) for tool in agent.tools.values()],
                    metadata=agent.metadata,
                    **{
                        f"{agent.transport}_url": agent.base_url,
                        f"{agent.transport}_headers": secret_references(
                            agent.agent_id, agent.headers, agent.transport.upper()
                        ),
                    },
                )
            elif agent.transport == "invocation":
                agents[agent.agent_id] = AgentSpec(
                    agent_id=agent.agent_id,
                    transport="invocation",
                    invocation_base_url=agent.base_url,
                    tools=[_tool(tool.schema) for tool in agent.tools.values()],
                    metadata=agent.metadata,
                )
        ordered = sorted(agents)
        nodes = {ORCHESTRATOR_NODE: Position()}
        for index, agent_id in enumerate(ordered):
            nodes[agent_id] = Position(x=320.0, y=160.0 * index)
        nodes.update({node: pos for node, pos in self._layout.nodes.items() if node in nodes})
        return Workspace(
            master=MasterUrls(
                base_url=self.settings.master_base_url, ws_url=ws_url_for(self.settings.master_base_url)
            ),
            agents=[agents[agent_id] for agent_id in ordered],
            links=[Link(source=agent_id, target=ORCHESTRATOR_NODE) for agent_id in ordered],
            layout=Layout(nodes=nodes, viewport=self._layout.viewport),
        )

    def export(self) -> str:
        return export_workspace(self.snapshot())


def isolation_of(settings: Settings) -> Isolation:
    """The agents' user and limits from the ``OPENAGENT_AGENT_*`` settings."""
    return Isolation(
        user=settings.openagent_agent_user,
        uid_base=settings.openagent_agent_uid_base,
        uid_count=settings.openagent_agent_uid_count,
        allow_unisolated=settings.openagent_allow_unisolated_agents,
        limits=AgentLimits(
            memory_mb=settings.openagent_agent_memory_mb,
            cpu_seconds=settings.openagent_agent_cpu_seconds,
            open_files=settings.openagent_agent_open_files,
            processes=settings.openagent_agent_max_processes,
        ),
    )


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9-]{0,31}) \S+$")


def secret_references(agent_id: str, headers: Mapping[str, str], prefix: str = "MCP") -> dict[str, str]:
    """Header values as references to environment variables, never the values: ``Authorization:
    Bearer xyz`` of agent ``github`` exports as ``Bearer ${MCP_GITHUB_AUTHORIZATION}`` (``prefix``
    ``A2A`` for an A2A agent)."""
    references = {}
    for name, value in headers.items():
        variable = re.sub(r"[^A-Z0-9]+", "_", f"{prefix}_{agent_id}_{name}".upper()).strip("_")
        scheme = _SCHEME.fullmatch(value.strip())
        references[name] = f"{scheme.group(1)} ${{{variable}}}" if scheme else f"${{{variable}}}"
    return references


def _tool(schema: ToolSchema) -> ToolSpec:
    return ToolSpec(
        name=schema.name,
        description=schema.description,
        parameters=schema.parameters,
        endpoint=schema.endpoint,
        requires_approval=schema.requires_approval or None,
    )


def _guarded(found: Discovered, spec: AgentSpec) -> Discovered:
    """The discovered tools, each one the workspace marks ``requires_approval`` still marked:
    a remote server does not say which of its tools need a person's approval, the workspace does."""
    marked = {tool.name for tool in spec.tools if tool.requires_approval}
    if not marked:
        return found
    tools = [
        tool.model_copy(update={"requires_approval": True}) if tool.name in marked else tool
        for tool in found.tools
    ]
    return replace(found, tools=tools)
