"""Loading a workspace YAML: safe parsing, validation, and the built-in query client.

Loading is safe: a size cap, the safe constructor, and alias bombs and deep nesting refused
before anything is expanded (:mod:`openagent._safe_yaml`). Unknown fields are errors naming
the field and its line. The built-in query client (``query-client``) is injected on load
(:func:`with_query_client`) and stripped on export (:func:`strip_query_client`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

import yaml
from pydantic import ValidationError

from openagent._safe_yaml import MAX_YAML_BYTES, field_path, line_of, parse
from openagent.errors import WorkspaceError, WorkspaceProblem
from openagent.workspace.schema import (
    ALLOWED_HANDLER_FOLDERS,
    ORCHESTRATOR_NODE,
    QUERY_CLIENT_ID,
    AgentSpec,
    Layout,
    Link,
    Position,
    SchemaVersion,
    Workspace,
)

__all__ = ["MAX_YAML_BYTES", "load_workspace", "strip_query_client", "with_query_client"]


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
    if "version" in data and data["version"] not in get_args(SchemaVersion):
        raise WorkspaceError(
            "invalid",
            [
                WorkspaceProblem(
                    f"unsupported workspace version {data['version']!r}; this OpenAgent reads versions "
                    f"{', '.join(str(v) for v in get_args(SchemaVersion))}",
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
