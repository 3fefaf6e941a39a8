"""Exporting a workspace as stable, secret-free YAML.

Exports are byte-identical for the same workspace: agents, links and layout are sorted and
positions rounded, so the same canvas always gives the same bytes (the web UI writes the
same key order). The built-in query client is left out, and so is every secret
(:mod:`openagent.workspace.redaction`).
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from openagent.workspace.loading import strip_query_client
from openagent.workspace.redaction import redact, scrub_url
from openagent.workspace.schema import SCHEMA_VERSION, AgentSpec, Workspace

__all__ = ["HEADER", "export_document", "export_workspace"]

HEADER = f"# OpenAgent workspace, schema version {SCHEMA_VERSION} (docs/workspace.schema.json)\n"
"""The comment line every export starts with."""


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
    if agent.mcp_url is not None:
        row["mcp_url"] = scrub_url(agent.mcp_url)
    if agent.mcp_headers:
        row["mcp_headers"] = dict(sorted(agent.mcp_headers.items()))  # references, never values
    if agent.a2a_url is not None:
        row["a2a_url"] = scrub_url(agent.a2a_url)
    if agent.a2a_headers:
        row["a2a_headers"] = dict(sorted(agent.a2a_headers.items()))  # references, never values
    if agent.handler is not None:
        row["handler"] = agent.handler
    row["tools"] = [tool.model_dump(mode="json", exclude_none=True) for tool in agent.tools]
    metadata = redact(agent.metadata)
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
