"""Workspace YAML shared by the workspace tests: the repo's example and a minimal workspace."""

from tests.factories import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "workspace.yaml"
SCHEMA_FILE = ROOT / "docs" / "workspace.schema.json"

MINIMAL = """\
version: 1
agents:
  - agent_id: unit-converter
    transport: websocket
    handler: agents.unit_converter
    tools:
      - name: convert
        description: Convert a value between units
links:
  - source: unit-converter
"""
