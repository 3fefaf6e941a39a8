"""``openagent.yaml_runner``: the workspace schema, safe loading, stable export, and the runner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import jsonschema_rs
import pytest
import yaml

from openagent import ClientConfig
from openagent.errors import WorkspaceError
from openagent.testing import ScriptedOpenAIServer
from openagent.yaml_runner import (
    QUERY_CLIENT_ID,
    YamlAgentRunner,
    export_workspace,
    json_schema_text,
    load_workspace,
)
from tests.factories import ROOT, MasterProcess, agent_rows

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


def problems(text: str) -> WorkspaceError:
    with pytest.raises(WorkspaceError) as caught:
        load_workspace(text)
    return caught.value


# ------------------------------------------------------------------ schema


def test_the_published_json_schema_is_up_to_date() -> None:
    assert SCHEMA_FILE.read_text() == json_schema_text(), (
        "docs/workspace.schema.json is stale: run "
        "python -m openagent.yaml_runner schema > docs/workspace.schema.json"
    )


def test_the_json_schema_validates_the_repo_example_workspace() -> None:
    validator = jsonschema_rs.validator_for(json.loads(SCHEMA_FILE.read_text()))
    document = yaml.safe_load(EXAMPLE.read_text())
    assert validator.is_valid(document), list(validator.iter_errors(document))
    workspace = load_workspace(EXAMPLE.read_text())
    assert {agent.agent_id for agent in workspace.agents} >= {"weather-agent", "demo-invocation-agent"}


def test_the_json_schema_refuses_an_unknown_field() -> None:
    validator = jsonschema_rs.validator_for(json.loads(SCHEMA_FILE.read_text()))
    document = yaml.safe_load(MINIMAL)
    document["agents"][0]["toolz"] = []
    assert not validator.is_valid(document)


# ------------------------------------------------------------------ errors name line and field


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        (MINIMAL.replace("    transport:", "    toolz: []\n    transport:"), 4, "agents[0].toolz"),
        (MINIMAL + "colour: blue\n", 11, "colour"),
        (MINIMAL.replace("        description:", "        descripton:"), 8, "agents[0].tools[0].descripton"),
        ("version: 1\nmaster:\n  base_url: http://x\n  secret: 1\n", 4, "master.secret"),
    ],
)
def test_unknown_fields_are_errors_naming_the_field_and_line(text: str, line: int, field: str) -> None:
    error = problems(text)
    assert error.code == "invalid"
    [problem] = error.problems
    assert (problem.line, problem.field) == (line, field)
    assert f"unknown field {field.rsplit('.', 1)[-1]!r}" in str(error)
    assert f"line {line}" in str(error)


def test_a_bad_value_names_its_line() -> None:
    error = problems(MINIMAL.replace("transport: websocket", "transport: carrier-pigeon"))
    assert error.problems[0].field == "agents[0].transport"
    assert error.problems[0].line == 4


def test_an_unsupported_version_is_named() -> None:
    assert "unsupported workspace version 2" in str(problems("version: 2\n"))


@pytest.mark.parametrize(
    "handler", ["../etc/passwd", "/etc/passwd", "os.path", "agents..x", "agents.x/../../y", "master.app"]
)
def test_handlers_outside_the_allowed_folders_are_refused(handler: str) -> None:
    error = problems(MINIMAL.replace("agents.unit_converter", json.dumps(handler)))
    assert error.problems[0].field == "agents[0].handler"
    assert "agents/" in str(error)


def test_invocation_agents_need_a_base_url() -> None:
    error = problems(MINIMAL.replace("transport: websocket", "transport: invocation"))
    assert "needs invocation_base_url" in str(error)


def test_a_link_to_an_unknown_agent_is_refused() -> None:
    assert "unknown node 'ghost'" in str(problems(MINIMAL + "  - source: ghost\n"))


# ------------------------------------------------------------------ bad input is refused early


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 12):
        ref = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([ref] * 9)}]")
    error = problems("\n".join(lines) + "\n")
    assert error.code == "yaml_bomb"
    assert "alias bomb" in str(error)


def test_a_50_megabyte_yaml_is_refused_by_size() -> None:
    huge = "agents: []\n# " + "x" * (50 * 1024 * 1024) + "\n"
    error = problems(huge)
    assert error.code == "too_large"
    assert "byte limit" in str(error)


def test_deep_nesting_and_several_documents_are_refused() -> None:
    assert problems("a: " + "[" * 200 + "]" * 200 + "\n").code == "too_deep"
    assert problems("version: 1\n---\nversion: 1\n").code == "yaml_syntax"


def test_python_tags_are_not_constructed() -> None:
    error = problems("version: !!python/object/apply:os.system ['true']\n")
    assert error.code == "yaml_syntax"


def test_invalid_yaml_names_its_line() -> None:
    error = problems("version: 1\nagents: [\n  {agent_id: x\n")
    assert error.code == "yaml_syntax"
    assert error.problems[0].line is not None


# ------------------------------------------------------------------ export


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


# ------------------------------------------------------------------ the runner


GOOD = """
from openagent import ToolError, ToolSchema

TOOLS = [ToolSchema(name="convert", description="Convert km to miles",
                    parameters={"type": "object", "properties": {"km": {"type": "number"}}})]

async def handle_tool(tool_name, arguments):
    if arguments.get("km") is None:
        raise RuntimeError("handler blew up")
    return {"miles": round(arguments["km"] * 0.621371, 3)}
"""

RUNNER_YAML = """\
version: 1
agents:
  - agent_id: yaml-converter
    handler: agents.converter
  - agent_id: yaml-broken
    handler: agents.broken
  - agent_id: yaml-missing
    handler: agents.nowhere
  - agent_id: yaml-escape
    handler: agents.escape
  - agent_id: yaml-http
    transport: invocation
    invocation_base_url: http://127.0.0.1:9
    tools: [{name: ping}]
"""


@pytest.fixture
def agents_root(tmp_path: Path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "converter.py").write_text(GOOD)
    (folder / "broken.py").write_text("import definitely_not_a_module_xyz\n")
    outside = tmp_path / "outside.py"
    outside.write_text(GOOD)
    (folder / "escape.py").symlink_to(outside)
    return tmp_path


async def test_the_runner_starts_each_agent_on_its_own_and_is_idempotent(
    master: MasterProcess, llm: ScriptedOpenAIServer, agents_root: Path
) -> None:
    runner = YamlAgentRunner(ClientConfig(master_ws=master.ws_url, keepalive_interval=0), root=agents_root)
    workspace = load_workspace(RUNNER_YAML)
    try:
        outcomes = {o.agent_id: o for o in await runner.start(workspace)}
        assert outcomes["yaml-converter"].status == "started"
        assert outcomes["yaml-broken"].status == "failed"
        assert "ModuleNotFoundError" in outcomes["yaml-broken"].reason
        assert outcomes["yaml-missing"].status == "failed"
        assert "no module 'agents.nowhere'" in outcomes["yaml-missing"].reason
        assert outcomes["yaml-escape"].status == "failed"
        assert "symlink out of agents/" in outcomes["yaml-escape"].reason
        assert outcomes["yaml-http"].status == "skipped"

        again = {o.agent_id: o.status for o in await runner.start(workspace)}
        assert again["yaml-converter"] == "already_running"
        rows = [row for row in await agent_rows(master.base_url) if row["agent_id"] == "yaml-converter"]
        assert len(rows) == 1
        assert [tool["name"] for tool in rows[0]["tools"]] == ["convert"]

        # a handler that raises fails its tool call; the agent and the master keep going
        llm.add_tool_call("yaml-converter__convert", {})
        llm.add_text("The converter failed.")
        llm.add_tool_call("yaml-converter__convert", {"km": 10})
        llm.add_text("10 km is 6.214 miles.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            failed = (await http.post("/query", json={"query": "convert nothing"})).json()
            assert failed["answer"] == "The converter failed."
            answered = (await http.post("/query", json={"query": "10 km in miles?"})).json()
        assert answered["answer"] == "10 km is 6.214 miles."
        tool_messages = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
        assert "6.214" in tool_messages[-1]["content"]
        first_tool = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
        assert "handler blew up" in first_tool[-1]["content"]
    finally:
        stopped = await runner.stop()
    assert [(o.agent_id, o.status) for o in stopped] == [("yaml-converter", "stopped")]
    async with asyncio.timeout(90):
        while "yaml-converter" in {row["agent_id"] for row in await agent_rows(master.base_url)}:
            await asyncio.sleep(0.05)


async def test_the_example_workspace_runs_the_sample_agents(master: MasterProcess) -> None:
    runner = YamlAgentRunner(ClientConfig(master_ws=master.ws_url, keepalive_interval=0), root=ROOT)
    try:
        outcomes = {
            o.agent_id: (o.status, o.reason) for o in await runner.start(load_workspace(EXAMPLE.read_text()))
        }
        # weather-agent comes from build_agent(), seller-agent from handle_tool + handle_collaboration
        assert outcomes["weather-agent"][0] == "started", outcomes
        assert outcomes["seller-agent"][0] == "started", outcomes
        assert outcomes["demo-invocation-agent"][0] == "skipped"
        rows = {row["agent_id"]: row for row in await agent_rows(master.base_url)}
        assert rows["seller-agent"]["metadata"]["supports_collaboration"] is True
    finally:
        await runner.stop()
