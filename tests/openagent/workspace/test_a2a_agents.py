"""A2A agents in a workspace: a URL and headers whose values refer to the master's environment."""

from __future__ import annotations

import pytest

from openagent.errors import WorkspaceError
from openagent.workspace import export_workspace, load_workspace
from openagent.workspace.schema import header_reference, resolve_headers

A2A_WORKSPACE = """\
# OpenAgent workspace, schema version 1 (docs/workspace.schema.json)
version: 1
master:
  base_url: http://127.0.0.1:8000
  ws_url: ws://127.0.0.1:8000/ws
agents:
- agent_id: currency-agent
  transport: a2a
  url: https://currency.example/a2a
  headers:
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
    assert agent is not None and agent.transport == "a2a" and agent.url == "https://currency.example/a2a"
    assert export_workspace(workspace) == A2A_WORKSPACE


@pytest.mark.parametrize(
    ("change", "problem", "reason"),
    [
        (
            "    Authorization: Bearer ${A2A_TOKEN}\n",
            "    Authorization: Bearer sk-live-1234\n",
            "headers: header 'Authorization' must refer to the master's environment",
        ),
        ("  url: https://currency.example/a2a\n", "", "transport 'a2a' needs url"),
        (
            "  transport: a2a\n",
            "  transport: invocation\n  invocation_base_url: http://x\n",
            "url and headers are only for transports ['a2a']",
        ),
        (
            "    X-Tenant: ${TENANT}\n",
            '    X-Tenant: "${TENANT}\\r\\nX-Evil: 1"\n',
            "header 'X-Tenant' must refer to the master's environment",
        ),
    ],
    ids=["a literal secret", "no url", "headers on an invocation agent", "a second header smuggled in"],
)
def test_a_workspace_never_holds_a_header_secret_and_names_the_problem(
    change: str, problem: str, reason: str
) -> None:
    with pytest.raises(WorkspaceError) as refused:
        load_workspace(A2A_WORKSPACE.replace(change, problem))
    message = str(refused.value)
    assert reason in message
    assert "sk-live-1234" not in message and "X-Evil" not in message


def test_header_references_are_resolved_from_the_environment() -> None:
    headers = {"Authorization": "Bearer ${A2A_TOKEN}", "X-Pair": "${A}:${B}"}
    environ = {"A2A_TOKEN": "t0k", "A": "1", "B": "2"}
    assert resolve_headers(headers, environ) == {"Authorization": "Bearer t0k", "X-Pair": "1:2"}
    with pytest.raises(KeyError, match="B"):
        resolve_headers(headers, {"A2A_TOKEN": "t0k", "A": "1"})
    with pytest.raises(ValueError, match="'A' holds a control character"):
        resolve_headers(headers, {**environ, "A": "1\r\nX-Evil: 1"})
    assert header_reference("currency-agent", "X-Api-Key") == "${CURRENCY_AGENT_X_API_KEY}"
