"""A2A agents in a workspace: ``a2a_url`` and ``a2a_headers`` holding references, never secrets."""

from __future__ import annotations

import pytest

from openagent.errors import WorkspaceError
from openagent.workspace import export_workspace, load_workspace

A2A_WORKSPACE = """\
# OpenAgent workspace, schema version 2 (docs/workspace.schema.json)
version: 2
master:
  base_url: http://127.0.0.1:8000
  ws_url: ws://127.0.0.1:8000/ws
agents:
- agent_id: currency-agent
  transport: a2a
  a2a_url: https://currency.example/a2a
  a2a_headers:
    Authorization: Bearer ${A2A_TOKEN}
    X-Tenant: ${TENANT}
  tools:
  - name: convert_currency
    description: Convert an amount between currencies
    parameters:
      type: object
      properties: {}
links:
- source: currency-agent
  target: orchestrator
layout:
  nodes:
    orchestrator:
      x: 0
      y: 0
"""


def test_an_a2a_agent_is_its_own_stable_export() -> None:
    workspace = load_workspace(A2A_WORKSPACE)
    agent = workspace.agent("currency-agent")
    assert agent is not None and agent.transport == "a2a" and agent.a2a_url == "https://currency.example/a2a"
    assert workspace.secret_references() == ["A2A_TOKEN", "TENANT"]
    assert export_workspace(workspace) == A2A_WORKSPACE


@pytest.mark.parametrize(
    ("change", "problem", "reason"),
    [
        (
            "    Authorization: Bearer ${A2A_TOKEN}\n",
            "    Authorization: Bearer sk-live-1234\n",
            "a2a_headers.Authorization: must refer to an environment variable",
        ),
        ("  a2a_url: https://currency.example/a2a\n", "", "transport 'a2a' needs a2a_url"),
        (
            "  transport: a2a\n",
            "  transport: mcp\n  mcp_url: http://x/mcp\n",
            "a2a_url and a2a_headers are only for transport 'a2a'",
        ),
        (
            "    X-Tenant: ${TENANT}\n",
            '    X-Tenant: "${TENANT}\\r\\nX-Evil: 1"\n',
            "a2a_headers.X-Tenant: must refer to an environment variable",
        ),
    ],
    ids=["a literal secret", "no url", "on an mcp agent", "a second header smuggled in"],
)
def test_a_workspace_never_holds_a_header_secret_and_names_the_problem(
    change: str, problem: str, reason: str
) -> None:
    with pytest.raises(WorkspaceError) as refused:
        load_workspace(A2A_WORKSPACE.replace(change, problem))
    message = str(refused.value)
    assert reason in message
    assert "sk-live-1234" not in message and "X-Evil" not in message
