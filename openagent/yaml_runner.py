"""Deprecated: the YAML workspace code is the package :mod:`openagent.workspace`.

``from openagent.yaml_runner import NAME`` keeps working for every name this module
exported, with a :class:`DeprecationWarning`; import from :mod:`openagent.workspace`
instead. ``python -m openagent.yaml_runner schema | check FILE | export FILE`` runs
``python -m openagent.workspace`` with the same arguments.
"""

from __future__ import annotations

import sys
import warnings

from openagent.workspace import (
    ALLOWED_HANDLER_FOLDERS,
    MAX_YAML_BYTES,
    ORCHESTRATOR_NODE,
    QUERY_CLIENT_ID,
    SCHEMA_VERSION,
    AgentOutcome,
    AgentSpec,
    Layout,
    Link,
    MasterUrls,
    Position,
    ToolSpec,
    Viewport,
    Workspace,
    YamlAgentRunner,
    build_agent,
    export_document,
    export_workspace,
    is_secret_name,
    json_schema,
    json_schema_text,
    load_workspace,
    scrub_url,
    strip_query_client,
    with_query_client,
)

warnings.warn(
    "openagent.yaml_runner is deprecated: import from openagent.workspace instead",
    DeprecationWarning,
    stacklevel=2,
)

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

if __name__ == "__main__":
    from openagent.workspace.__main__ import _main

    raise SystemExit(_main(sys.argv[1:]))
