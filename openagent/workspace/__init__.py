"""YAML workspaces: load, export, and run the agents they name.

One schema (:class:`Workspace`, version 2; version 1 files load too) serves the web UI's export and upload, the
master's ``/internal/yaml-agents/start`` and ``/internal/workspace/restore``, and the
``openagent workspace`` command. Its JSON Schema is ``docs/workspace.schema.json``
(regenerate it with ``python -m openagent.workspace schema > docs/workspace.schema.json``)::

    from openagent.workspace import export_workspace, load_workspace

    workspace = load_workspace(Path("ws.yaml").read_text())  # WorkspaceError names line and field
    text = export_workspace(workspace)                       # stable, secret-free YAML

One concept per module:

======================= ======================================================================
:mod:`.schema`          the models (:class:`Workspace`, :class:`AgentSpec`, ...) and the JSON Schema
:mod:`.loading`         safe parsing and validation; the built-in query client added and removed
:mod:`.redaction`       which metadata keys, values and URL parts are credentials
:mod:`.export`          stable, secret-free YAML
:mod:`.runner`          :class:`YamlAgentRunner`: a workspace's WebSocket agents from their
                        ``handler`` modules, in this event loop, connected to a master
:mod:`.processes`       ``ProcessAgentRunner``: the same, each agent in a supervised child
                        process (:mod:`.child`), so agent code cannot take the host down;
                        what the master uses
:mod:`.cli`             ``openagent workspace ...`` and ``openagent generate``, over the
                        master's HTTP endpoints
======================= ======================================================================

Loading and exporting need the ``workspace`` extra (PyYAML: ``pip install
'openagent[workspace]'``); the names below are imported on first use, so the command line
works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openagent._lazy import lazy_names

if TYPE_CHECKING:
    from openagent.workspace.export import export_document, export_workspace
    from openagent.workspace.loading import (
        MAX_YAML_BYTES,
        load_workspace,
        strip_query_client,
        with_query_client,
    )
    from openagent.workspace.redaction import is_secret_name, scrub_url
    from openagent.workspace.runner import AgentOutcome, YamlAgentRunner, build_agent
    from openagent.workspace.schema import (
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
        json_schema,
        json_schema_text,
    )

_LAZY = {
    "ALLOWED_HANDLER_FOLDERS": "schema",
    "AgentOutcome": "runner",
    "AgentSpec": "schema",
    "Layout": "schema",
    "Link": "schema",
    "MAX_YAML_BYTES": "loading",
    "MasterUrls": "schema",
    "ORCHESTRATOR_NODE": "schema",
    "Position": "schema",
    "QUERY_CLIENT_ID": "schema",
    "SCHEMA_VERSION": "schema",
    "ToolSpec": "schema",
    "Viewport": "schema",
    "Workspace": "schema",
    "YamlAgentRunner": "runner",
    "build_agent": "runner",
    "export_document": "export",
    "export_workspace": "export",
    "is_secret_name": "redaction",
    "json_schema": "schema",
    "json_schema_text": "schema",
    "load_workspace": "loading",
    "scrub_url": "redaction",
    "strip_query_client": "loading",
    "with_query_client": "loading",
}
"""Public name → the module of this package that defines it (imported on first use)."""


__getattr__ = lazy_names(__name__, _LAZY, "workspace")


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
