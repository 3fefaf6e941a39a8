"""``openagent.workspace.export``: stable, secret-free exports; the query client is stripped."""

from __future__ import annotations

import pytest

from openagent.errors import WorkspaceError
from openagent.workspace import QUERY_CLIENT_ID, export_workspace, load_workspace
from tests.openagent.workspace.samples import EXAMPLE, MINIMAL


def test_the_example_is_its_own_stable_export() -> None:
    text = EXAMPLE.read_text()
    assert export_workspace(load_workspace(text)) == text


def test_exports_are_byte_identical_whatever_the_input_order() -> None:
    two = MINIMAL.replace("links:", "  - agent_id: alpha\n    tools: [{name: a}]\nlinks:")
    reordered = two.replace(
        "links:\n  - source: unit-converter", "links:\n  - source: alpha\n  - source: unit-converter"
    )
    again = two.replace(
        "links:\n  - source: unit-converter", "links:\n  - source: unit-converter\n  - source: alpha"
    )
    first, second = export_workspace(load_workspace(reordered)), export_workspace(load_workspace(again))
    assert first == second
    assert first.index("agent_id: alpha") < first.index("agent_id: unit-converter")


def test_the_query_client_is_injected_on_load_and_stripped_on_export() -> None:
    workspace = load_workspace(MINIMAL)
    client = workspace.agent(QUERY_CLIENT_ID)
    assert client is not None and client.builtin and client.role == "query"
    assert QUERY_CLIENT_ID in workspace.layout.nodes
    exported = export_workspace(workspace)
    assert QUERY_CLIENT_ID not in exported
    # an upload that carries the query client (an older export) loads to the same workspace
    with_client = MINIMAL + "  - source: query-client\n"
    assert export_workspace(load_workspace(with_client)) == exported


def test_secrets_are_never_exported() -> None:
    text = """\
version: 1
master:
  base_url: http://admin:hunter2@127.0.0.1:8000
  ws_url: ws://127.0.0.1:8000/ws?token=abc123&lang=en
agents:
  - agent_id: billing
    transport: invocation
    invocation_base_url: https://bot:s3cret@billing.internal:9000/api?api_key=k1
    tools: [{name: charge}]
    metadata:
      description: Charges cards
      api_key: k-123
      OPENAI_API_KEY: sk-abcdefghijklmnopqrstuvwxyz
      auth: {password: pw, user: me}
      note: Bearer eyJhbGciOi
      raw: sk-proj-abcdefghijklmnopqrstuvwx
      max_tokens: 512
      homepage: https://me:pw@example.com/x
"""
    exported = export_workspace(load_workspace(text))
    for secret in (
        "hunter2",
        "admin",
        "abc123",
        "s3cret",
        "bot:",
        "k1",
        "k-123",
        "sk-",
        "pw",
        "eyJ",
        "Bearer",
    ):
        assert secret not in exported, secret
    assert "max_tokens: 512" in exported
    assert "lang=en" in exported
    assert "description: Charges cards" in exported


MCP_AGENT = """\
version: 2
agents:
  - agent_id: github
    transport: mcp
    mcp_url: https://mcp.example.com/mcp
    mcp_headers:
      X-Team: ${TEAM_ID}
      Authorization: Bearer ${MCP_TOKEN}
    tools: [{name: search_issues}]
links:
  - source: github
"""


def test_mcp_agents_keep_their_url_and_header_references() -> None:
    workspace = load_workspace(MCP_AGENT)
    agent = workspace.agent("github")
    assert agent is not None and agent.transport == "mcp" and agent.mcp_url == "https://mcp.example.com/mcp"
    assert workspace.secret_references() == ["MCP_TOKEN", "TEAM_ID"]
    exported = export_workspace(workspace)
    assert "mcp_url: https://mcp.example.com/mcp" in exported
    assert "Authorization: Bearer ${MCP_TOKEN}" in exported
    assert exported.index("Authorization:") < exported.index("X-Team:")  # sorted: stable bytes
    assert export_workspace(load_workspace(exported)) == exported


@pytest.mark.parametrize(
    "value", ["Bearer ghp_literal_token_value", "s3cr3t", "${MCP_TOKEN} trailing", "$MCP_TOKEN"]
)
def test_a_literal_header_value_is_refused_without_repeating_it(value: str) -> None:
    text = MCP_AGENT.replace("Bearer ${MCP_TOKEN}", value)
    with pytest.raises(WorkspaceError) as refused:
        load_workspace(text)
    message = str(refused.value)
    assert "agents[0].mcp_headers.Authorization: must refer to an environment variable" in message
    assert value not in message


def test_mcp_fields_belong_to_mcp_agents() -> None:
    with pytest.raises(WorkspaceError, match="transport 'mcp' needs mcp_url"):
        load_workspace(MCP_AGENT.replace("    mcp_url: https://mcp.example.com/mcp\n", ""))
    with pytest.raises(WorkspaceError, match="only for transport 'mcp'"):
        load_workspace(MCP_AGENT.replace("transport: mcp", "transport: websocket"))
