"""YAML workspaces: load, export, and run the agents they name.

One schema (:class:`Workspace`, version 1) serves the UI's export and upload, the master's
``/internal/yaml-agents/start`` and ``/internal/workspace/restore``, and the CLI. Its JSON
Schema is ``docs/workspace.schema.json`` (regenerate it with
``python -m openagent.yaml_runner schema > docs/workspace.schema.json``)::

    from openagent.yaml_runner import export_workspace, load_workspace

    workspace = load_workspace(Path("ws.yaml").read_text())  # WorkspaceError names line and field
    text = export_workspace(workspace)                       # stable, secret-free YAML

Loading is safe: a size cap, the safe constructor, and alias bombs and deep nesting refused
before anything is expanded. Unknown fields are errors naming the field and its line.
The built-in query client (``query-client``) is injected on load and stripped on export.
Exports are byte-identical for the same workspace (agents, links and layout sorted) and
never carry secrets: metadata keys that name a credential (``api_key``, ``token``,
``password``, ...), values that look like one (``sk-...``, ``Bearer ...``), and user
names, passwords and token parameters in URLs are dropped.

:class:`YamlAgentRunner` starts a workspace's WebSocket agents inside the current event
loop from their ``handler`` modules (only under ``agents/``, ``system_agents/`` and
``sample_agents/``), connected to a master over loopback.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import yaml
from pydantic import ValidationError

from openagent._safe_yaml import MAX_YAML_BYTES, field_path, line_of, parse
from openagent._workspace_schema import (
    ALLOWED_HANDLER_FOLDERS,
    ORCHESTRATOR_NODE,
    QUERY_CLIENT_ID,
    SCHEMA_VERSION,
    AgentSpec,
    Layout,
    Link,
    MasterUrls,
    Position,
    ToolSpec,
    Viewport,
    Workspace,
)
from openagent.action import OrchestratorActionAgent, OrchestratorWebSocketActionAgent
from openagent.agent_modules import ModuleRef, load_module, parse_handler
from openagent.config import ClientConfig
from openagent.errors import AgentModuleError, OpenAgentError, WorkspaceError, WorkspaceProblem

__all__ = [
    "ALLOWED_HANDLER_FOLDERS",
    "MAX_YAML_BYTES",
    "ORCHESTRATOR_NODE",
    "QUERY_CLIENT_ID",
    "SCHEMA_VERSION",
    "AgentOutcome",
    "AgentSpec",
    "Layout",
    "Link",
    "MasterUrls",
    "Position",
    "ToolSpec",
    "Viewport",
    "Workspace",
    "YamlAgentRunner",
    "build_agent",
    "export_document",
    "export_workspace",
    "is_secret_name",
    "json_schema",
    "json_schema_text",
    "load_workspace",
    "scrub_url",
    "strip_query_client",
    "with_query_client",
]

logger = logging.getLogger("openagent.yaml_runner")

HEADER = f"# OpenAgent workspace, schema version {SCHEMA_VERSION} (docs/workspace.schema.json)\n"

# ------------------------------------------------------------------ loading


def load_workspace(text: str | bytes, *, max_bytes: int = MAX_YAML_BYTES) -> Workspace:
    """Parse and validate a workspace YAML; the built-in query client is injected.

    Raises:
        WorkspaceError: Too large, an alias bomb, too deep, not YAML, or not a valid
            workspace; each problem names its line and field.
    """
    data, node = parse(text, max_bytes=max_bytes)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise WorkspaceError(
            "invalid", [WorkspaceProblem("a workspace is a mapping (version, master, agents, ...)", line=1)]
        )
    if "version" in data and data["version"] != SCHEMA_VERSION:
        raise WorkspaceError(
            "invalid",
            [
                WorkspaceProblem(
                    f"unsupported workspace version {data['version']!r}; this OpenAgent reads version "
                    f"{SCHEMA_VERSION}",
                    line=line_of(node, ("version",)),
                    field="version",
                )
            ],
        )
    try:
        workspace = Workspace.model_validate(data)
    except ValidationError as exc:
        raise WorkspaceError("invalid", [_problem(error, node) for error in exc.errors()]) from None
    return with_query_client(workspace)


def _problem(error: Mapping[str, Any], node: yaml.Node | None) -> WorkspaceProblem:
    loc = tuple(part for part in error["loc"] if isinstance(part, int | str))
    if error["type"] == "extra_forbidden":
        name = loc[-1] if loc else "?"
        return WorkspaceProblem(
            f"unknown field {name!r}", line=line_of(node, loc, key=True), field=field_path(loc)
        )
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "string_pattern_mismatch" and loc and loc[-1] == "handler":
        message = (
            f"handler {error.get('input')!r} refused: use a module under "
            + ", ".join(f"{folder}/" for folder in ALLOWED_HANDLER_FOLDERS)
            + " such as 'agents.my_agent' or 'agents.my_agent:handle_tool'"
        )
    return WorkspaceProblem(message, line=line_of(node, loc), field=field_path(loc) or None)


def with_query_client(workspace: Workspace) -> Workspace:
    """The workspace with the built-in query client, its link and a position (idempotent)."""
    agents = list(workspace.agents)
    if workspace.agent(QUERY_CLIENT_ID) is None:
        agents.insert(0, AgentSpec(agent_id=QUERY_CLIENT_ID, role="query", builtin=True))
    links = list(workspace.links)
    if not any(QUERY_CLIENT_ID in (link.source, link.target) for link in links):
        links.insert(0, Link(source=QUERY_CLIENT_ID, target=ORCHESTRATOR_NODE))
    nodes = dict(workspace.layout.nodes)
    nodes.setdefault(QUERY_CLIENT_ID, Position(x=-320.0, y=0.0))
    nodes.setdefault(ORCHESTRATOR_NODE, Position(x=0.0, y=0.0))
    layout = Layout(nodes=nodes, viewport=workspace.layout.viewport)
    return workspace.model_copy(update={"agents": agents, "links": links, "layout": layout})


def strip_query_client(workspace: Workspace) -> Workspace:
    """The workspace without built-in agents, their links and their positions."""
    builtin = {agent.agent_id for agent in workspace.agents if agent.builtin}
    builtin.add(QUERY_CLIENT_ID)
    agents = [agent for agent in workspace.agents if agent.agent_id not in builtin]
    links = [link for link in workspace.links if link.source not in builtin and link.target not in builtin]
    nodes = {node: pos for node, pos in workspace.layout.nodes.items() if node not in builtin}
    layout = Layout(nodes=nodes, viewport=workspace.layout.viewport)
    return workspace.model_copy(update={"agents": agents, "links": links, "layout": layout})


def json_schema() -> dict[str, Any]:
    """The workspace's JSON Schema (what ``docs/workspace.schema.json`` holds)."""
    return Workspace.model_json_schema()


def json_schema_text() -> str:
    """:func:`json_schema` as the exact text of ``docs/workspace.schema.json``."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


# ------------------------------------------------------------------ exporting

_SECRET_SUFFIXES = (
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "credentials",
    "authorization",
    "privatekey",
    "accesskey",
    "secretkey",
    "cookie",
)
_SECRET_NAMES = frozenset({"auth", "key", "bearer", "pwd"})
_SECRET_VALUE = re.compile(
    r"^(sk-[A-Za-z0-9_-]{16,}|bearer\s+\S+|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-\S+|AKIA[0-9A-Z]{16})$",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """Whether a metadata key or URL parameter names a credential (``max_tokens`` does not)."""
    flat = re.sub(r"[^a-z0-9]", "", name.lower())
    return flat in _SECRET_NAMES or flat.endswith(_SECRET_SUFFIXES)


def _redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            str(key): _redact(inner)
            for key, inner in value.items()
            if not is_secret_name(str(key)) and not _looks_secret(inner)
        }
    if isinstance(value, list):
        return [_redact(inner) for inner in value if not _looks_secret(inner)]
    if isinstance(value, str) and re.match(r"^[a-z][a-z0-9+.-]*://", value, re.IGNORECASE):
        return scrub_url(value)
    return value


def _looks_secret(value: Any) -> bool:
    return isinstance(value, str) and bool(_SECRET_VALUE.fullmatch(value.strip()))


def scrub_url(url: str) -> str:
    """The URL without user name, password, or credential-named query parameters."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = urlencode(
        [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_secret_name(k)]
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _number(value: float) -> float | int:
    """Positions as short, stable numbers: integral floats become ints, others 3 decimals."""
    if not math.isfinite(value):
        return 0
    rounded = round(value, 3)
    return int(rounded) if rounded == int(rounded) else rounded


def _agent_document(agent: AgentSpec) -> dict[str, Any]:
    row: dict[str, Any] = {"agent_id": agent.agent_id}
    if agent.role != "action":
        row["role"] = agent.role
    row["transport"] = agent.transport
    if agent.invocation_base_url is not None:
        row["invocation_base_url"] = scrub_url(agent.invocation_base_url)
    if agent.handler is not None:
        row["handler"] = agent.handler
    row["tools"] = [tool.model_dump(mode="json", exclude_none=True) for tool in agent.tools]
    metadata = _redact(agent.metadata)
    if metadata:
        row["metadata"] = metadata
    return row


def export_document(workspace: Workspace) -> dict[str, Any]:
    """The export as plain data: no built-in query client, no secrets, everything sorted."""
    workspace = strip_query_client(workspace)
    links = sorted({(link.source, link.target) for link in workspace.links})
    layout: dict[str, Any] = {
        "nodes": {
            node: {"x": _number(pos.x), "y": _number(pos.y)}
            for node, pos in sorted(workspace.layout.nodes.items())
        }
    }
    if workspace.layout.viewport is not None:
        view = workspace.layout.viewport
        layout["viewport"] = {"x": _number(view.x), "y": _number(view.y), "zoom": _number(view.zoom)}
    return {
        "version": SCHEMA_VERSION,
        "master": {
            "base_url": scrub_url(workspace.master.base_url),
            "ws_url": scrub_url(workspace.master.ws_url),
        },
        "agents": [_agent_document(agent) for agent in sorted(workspace.agents, key=lambda a: a.agent_id)],
        "links": [{"source": source, "target": target} for source, target in links],
        "layout": layout,
    }


class _Dumper(yaml.SafeDumper):
    """Never writes anchors or aliases: exports are plain trees."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def export_workspace(workspace: Workspace) -> str:
    """The workspace as stable YAML: the same workspace always gives the same bytes."""
    body = yaml.dump(
        export_document(workspace),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )
    return HEADER + body


# ------------------------------------------------------------------ running

OutcomeStatus = Literal["started", "already_running", "failed", "skipped", "stopped", "not_running"]


@dataclass(frozen=True, slots=True)
class AgentOutcome:
    """What happened to one agent of a start or stop request."""

    agent_id: str
    status: OutcomeStatus
    reason: str = ""
    handler: str | None = None

    def as_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"agent_id": self.agent_id, "status": self.status}
        if self.reason:
            row["reason"] = self.reason
        if self.handler:
            row["handler"] = self.handler
        return row


_FACTORIES = ("build_agent", "make_agent", "create_agent")


def build_agent(
    spec: AgentSpec, ref: ModuleRef, module: Any, config: ClientConfig
) -> OrchestratorWebSocketActionAgent:
    """The agent a handler module defines, connected with ``config``.

    - ``module:function``: ``function`` is the tool handler; the tools are the workspace's,
      else the module's ``TOOLS``.
    - ``module`` with ``handle_tool``: the same, with ``handle_collaboration`` as the
      collaboration handler when the module defines one.
    - ``module`` with ``build_agent()`` / ``make_agent()`` / ``create_agent()``: the agent
      it returns (its id must be the workspace's).

    Raises:
        AgentModuleError: ``import_failed`` naming what is missing or wrong.
    """
    name = ref.function or ("handle_tool" if hasattr(module, "handle_tool") else None)
    if name is None:
        return _from_factory(spec, ref, module, config)
    handler = getattr(module, name, None)
    if not callable(handler):
        raise AgentModuleError("import_failed", f"{ref.module!r} has no function {name!r}")
    tools: Any = [tool.model_dump(exclude_none=True) for tool in spec.tools] or getattr(module, "TOOLS", None)
    if not tools:
        raise AgentModuleError(
            "import_failed",
            f"agent {spec.agent_id!r}: no tools in the workspace and no TOOLS in {ref.module!r}",
        )
    collaboration = getattr(module, "handle_collaboration", None) if ref.function is None else None
    try:
        return OrchestratorActionAgent(
            spec.agent_id,
            tools,
            handler,
            collaboration_handler=collaboration if callable(collaboration) else None,
            metadata=spec.metadata,
            config=config,
        )
    except OpenAgentError as exc:
        raise AgentModuleError("import_failed", f"agent {spec.agent_id!r}: {exc}") from exc


def _from_factory(
    spec: AgentSpec, ref: ModuleRef, module: Any, config: ClientConfig
) -> OrchestratorWebSocketActionAgent:
    factory = next(
        (getattr(module, name) for name in _FACTORIES if callable(getattr(module, name, None))), None
    )
    if factory is None:
        raise AgentModuleError(
            "import_failed",
            f"{ref.module!r} defines no handle_tool() and no {'/'.join(_FACTORIES)}(); "
            "name a function with 'module:function'",
        )
    try:
        accepts_config = "config" in inspect.signature(factory).parameters
        agent = factory(config=config) if accepts_config else factory()
    except Exception as exc:
        raise AgentModuleError(
            "import_failed", f"{ref.module!r}.{factory.__name__}() raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(agent, OrchestratorWebSocketActionAgent):
        raise AgentModuleError(
            "import_failed",
            f"{ref.module!r}.{factory.__name__}() returned {type(agent).__name__}, not a WebSocket action agent",
        )
    if agent.agent_id != spec.agent_id:
        raise AgentModuleError(
            "import_failed",
            f"{ref.module!r} builds agent {agent.agent_id!r} but the workspace names {spec.agent_id!r}",
        )
    agent.config = config
    return agent


@dataclass
class _Running:
    agent: OrchestratorWebSocketActionAgent
    handler: str


class YamlAgentRunner:
    """Runs a workspace's WebSocket agents in this event loop, connected to one master.

    Args:
        config: How the agents reach the master (e.g. ``ws://127.0.0.1:<port>/ws``).
        root: The directory holding ``agents/``, ``system_agents/`` and ``sample_agents/``.
        is_connected: Tells whether an agent id is already connected to the master by
            someone else; such agents are skipped rather than replaced.

    Starting is idempotent: an agent this runner already runs is reported
    ``already_running`` and left alone. Each agent succeeds or fails on its own: a
    handler module that cannot be imported fails that agent only, naming the reason.
    A handler that raises fails its tool call, never the runner.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        root: Path,
        is_connected: Callable[[str], bool] | None = None,
    ) -> None:
        self.config = config
        self.root = root
        self._is_connected = is_connected or (lambda _agent_id: False)
        self._running: dict[str, _Running] = {}
        self._lock = asyncio.Lock()

    def running(self) -> dict[str, str]:
        """Agent id → handler of every agent this runner runs."""
        return {agent_id: running.handler for agent_id, running in sorted(self._running.items())}

    async def start(self, workspace: Workspace) -> list[AgentOutcome]:
        """Start every WebSocket action agent of the workspace that has a handler."""
        async with self._lock:
            outcomes = await asyncio.gather(
                *(self._start_one(spec) for spec in workspace.agents if not spec.builtin)
            )
        return sorted(outcomes, key=lambda outcome: outcome.agent_id)

    async def _start_one(self, spec: AgentSpec) -> AgentOutcome:
        agent_id = spec.agent_id
        if spec.role != "action":
            return AgentOutcome(agent_id, "skipped", "query agents are not run by the YAML runner")
        if spec.transport != "websocket":
            return AgentOutcome(
                agent_id, "skipped", "invocation agents serve HTTP themselves; restore registers them"
            )
        if spec.handler is None:
            return AgentOutcome(agent_id, "skipped", "no handler module to run")
        known = self._running.get(agent_id)
        if known is not None:
            return AgentOutcome(agent_id, "already_running", handler=known.handler)
        if self._is_connected(agent_id):
            return AgentOutcome(
                agent_id, "skipped", "already connected to the master by another process", spec.handler
            )
        try:
            ref = parse_handler(spec.handler)
            module = await asyncio.to_thread(load_module, self.root, ref)
            agent = build_agent(spec, ref, module, self.config)
            await agent.start()
        except AgentModuleError as exc:
            logger.warning("YAML agent %s not started: %s", agent_id, exc)
            return AgentOutcome(agent_id, "failed", str(exc), spec.handler)
        except OpenAgentError as exc:
            logger.warning("YAML agent %s could not connect: %s", agent_id, exc)
            return AgentOutcome(agent_id, "failed", f"{type(exc).__name__}: {exc}", spec.handler)
        self._running[agent_id] = _Running(agent, spec.handler)
        logger.info("YAML agent %s started from %s", agent_id, spec.handler)
        return AgentOutcome(agent_id, "started", handler=spec.handler)

    async def stop(self, agent_ids: Iterable[str] | None = None) -> list[AgentOutcome]:
        """Stop the given agents (every running one when ``None``)."""
        async with self._lock:
            wanted = sorted(self._running) if agent_ids is None else sorted(set(agent_ids))
            outcomes = []
            for agent_id in wanted:
                running = self._running.pop(agent_id, None)
                if running is None:
                    outcomes.append(AgentOutcome(agent_id, "not_running"))
                    continue
                await running.agent.stop()
                outcomes.append(AgentOutcome(agent_id, "stopped", handler=running.handler))
        return outcomes

    async def aclose(self) -> None:
        """Stop everything (the master's shutdown)."""
        await self.stop()


def _main(argv: list[str]) -> int:
    """``python -m openagent.yaml_runner schema|check FILE|export FILE``."""
    if argv[:1] == ["schema"]:
        sys.stdout.write(json_schema_text())
        return 0
    if len(argv) == 2 and argv[0] in ("check", "export"):
        try:
            workspace = load_workspace(Path(argv[1]).read_bytes())
        except WorkspaceError as exc:
            sys.stderr.write(f"{argv[1]}: {exc}\n")
            return 1
        sys.stdout.write(export_workspace(workspace) if argv[0] == "export" else "ok\n")
        return 0
    sys.stderr.write("usage: python -m openagent.yaml_runner schema | check FILE | export FILE\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
