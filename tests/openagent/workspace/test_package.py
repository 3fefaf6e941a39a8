"""``openagent.workspace``: the names the master and users import, and the command line without PyYAML."""

from __future__ import annotations

import subprocess
import sys

import pytest

import openagent.workspace
from tests.factories import ROOT

EXPORTED = [
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
"""What :mod:`openagent.workspace` exports, name for name."""


def test_all_is_pinned_and_every_name_resolves_to_its_module() -> None:
    assert openagent.workspace.__all__ == EXPORTED
    for name in EXPORTED:
        value = getattr(openagent.workspace, name)
        module = sys.modules[f"openagent.workspace.{openagent.workspace._LAZY[name]}"]
        assert getattr(module, name) is value, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        openagent.workspace.Nope  # noqa: B018


def test_the_command_line_loads_without_pyyaml() -> None:
    """``openagent workspace export`` talks to the master only; PyYAML is for loading and exporting."""
    code = (
        "import sys\n"
        "sys.modules['yaml'] = None\n"
        "import openagent.cli, openagent.workspace.cli\n"
        "try:\n"
        "    openagent.workspace.load_workspace\n"
        "except ImportError as exc:\n"
        "    assert \"pip install 'openagent[workspace]'\" in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('load_workspace imported without PyYAML')\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr


def test_python_m_prints_the_published_schema() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "openagent.workspace", "schema"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert completed.stdout == (ROOT / "docs" / "workspace.schema.json").read_text()
