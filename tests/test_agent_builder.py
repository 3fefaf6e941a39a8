"""The builder walk-through end to end: generate a unit converter with the scripted model, check, save,
discover, run it from YAML, ask; export the workspace, restore it on a second master (another Redis
database), and ask again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from openagent import InvocationActionAgent, ToolSchema
from openagent.testing import ScriptedOpenAIServer
from openagent.workspace import load_workspace
from tests.conftest import master_env
from tests.factories import SECOND_REDIS_URL, MasterProcess, agent_rows, agents_root
from tests.master.builder.samples import BAD, PROSE, UNIT_CONVERTER, fenced

ECHO = ToolSchema(
    name="shout",
    description="Upper-cases a text",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    endpoint="/shout",
)


async def shout(tool_name: str, arguments: dict[str, Any]) -> dict[str, str]:
    return {"text": str(arguments["text"]).upper()}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agents_root(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="module")
def first(scripted_llm: ScriptedOpenAIServer, root: Path) -> Iterator[MasterProcess]:
    env = master_env(scripted_llm, OPENAGENT_AGENTS_ROOT=str(root), OPENAGENT_LLM_TIMEOUT="3")
    with MasterProcess(env) as process:
        yield process


@pytest.fixture
def second(scripted_llm: ScriptedOpenAIServer, root: Path) -> Iterator[MasterProcess]:
    client = redis.Redis.from_url(SECOND_REDIS_URL, socket_connect_timeout=2)
    try:
        client.flushdb()
    finally:
        client.close()
    env = master_env(scripted_llm, OPENAGENT_AGENTS_ROOT=str(root), REDIS_URL=SECOND_REDIS_URL)
    with MasterProcess(env) as process:
        yield process


def checks_of(body: dict[str, Any]) -> dict[str, bool]:
    return {check["name"]: check["passed"] for check in body["checks"]}


async def ask_converter(http: httpx.AsyncClient, llm: ScriptedOpenAIServer, km: float) -> tuple[str, str]:
    """Ask a question that the scripted model answers with the converter's tool; returns answer and tool output."""
    before = len(llm.requests)
    llm.add_tool_call("unit-converter__convert", {"value": km, "from_unit": "km", "to_unit": "mi"})
    llm.add_text(f"{km} km is about that many miles.")
    response = await http.post("/query", json={"query": f"How many miles is {km} km?"})
    assert response.status_code == 200, response.text
    tool_messages = [m for m in llm.requests[before + 1]["messages"] if m["role"] == "tool"]
    return response.json()["answer"], tool_messages[-1]["content"]


async def test_generate_save_discover_run_ask_export_restore_ask_again(
    first: MasterProcess, second: MasterProcess, llm: ScriptedOpenAIServer, root: Path
) -> None:
    async with httpx.AsyncClient(base_url=first.base_url, timeout=60) as http:
        # 1. Generate: bad code first, fixed after the checks are fed back.
        llm.add_text(fenced(BAD))
        llm.add_text(fenced(UNIT_CONVERTER))
        response = await http.post(
            "/generate-agent",
            json={
                "name": "Unit converter",
                "description": "Converts km/mi, kg/lb, C/F",
                "tools": ["convert"],
            },
        )
        assert response.status_code == 200, response.text
        generated = response.json()
        assert (generated["module"], generated["agent_id"], generated["attempts"]) == (
            "unit_converter",
            "unit-converter",
            2,
        )
        assert all(checks_of(generated).values()) and "smoke_import" in checks_of(generated)
        assert "'subprocess' is not allowed" in llm.requests[-1]["messages"][-1]["content"]

        # 2. Save.
        saved = await http.post(
            "/save-agent", json={"module": generated["module"], "source": generated["source"]}
        )
        assert saved.status_code == 200, saved.text
        assert saved.json()["handler"] == "agents.unit_converter"
        assert (root / "agents" / "unit_converter.py").read_text() == generated["source"]

        # 3. Discover.
        found = (await http.get("/agents/discover")).json()
        [row] = [agent for agent in found["agents"] if agent["agent_id"] == "unit-converter"]
        assert (row["handler"], row["transport"]) == ("agents.unit_converter", "websocket")
        assert [tool["name"] for tool in row["tools"]] == ["convert"]

        # 4. Start from a YAML built from the discovery row (twice: no duplicate).
        workspace_yaml = json.dumps(
            {
                "version": 1,
                "agents": [{"agent_id": row["agent_id"], "handler": row["handler"], "tools": row["tools"]}],
                "links": [{"source": row["agent_id"]}],
                "layout": {"nodes": {"unit-converter": {"x": 400, "y": 40}}},
            }
        )
        for expected in ("started", "already_running"):
            started = await http.post("/internal/yaml-agents/start", json={"yaml": workspace_yaml})
            assert started.status_code == 200, started.text
            assert started.json()["agents"] == [
                {"agent_id": "unit-converter", "status": expected, "handler": "agents.unit_converter"}
            ]
        assert [r["agent_id"] for r in await agent_rows(first.base_url)].count("unit-converter") == 1

        # 5. Ask: the generated code computes the answer.
        _, tool_output = await ask_converter(http, llm, 10)
        assert json.loads(tool_output)["result"] == {"value": 6.214, "unit": "mi"}

        # An invocation agent joins, so that the export carries both kinds.
        invocation = InvocationActionAgent(
            "shouter", [ECHO], tool_handler=shout, host="127.0.0.1", port=0, master_base_url=first.base_url
        )
        async with invocation:
            # 6. Export, twice: byte-identical, no query client, the layout kept.
            exported = (await http.get("/internal/workspace/export")).text
            assert (await http.get("/internal/workspace/export")).text == exported
            workspace = load_workspace(exported)
            # (other tests' invocation agents may share this Redis database: check ours, not all)
            assert {"query-client", "unit-converter", "shouter"} <= {a.agent_id for a in workspace.agents}
            assert "query-client" not in exported
            assert workspace.layout.nodes["unit-converter"].x == 400
            assert workspace.agent("unit-converter").handler == "agents.unit_converter"  # type: ignore[union-attr]

            # 7. Restore on the second master (another Redis database) and run the YAML agents there.
            async with httpx.AsyncClient(base_url=second.base_url, timeout=60) as other:
                assert {
                    r["agent_id"] for r in await agent_rows(second.base_url)
                } == set()  # its own, empty database
                restored = await other.post(
                    "/internal/workspace/restore", json={"yaml": exported, "register_http": True}
                )
                assert restored.status_code == 200, restored.text
                ours = {"shouter", "unit-converter"}  # (the export may carry other tests' agents)
                outcomes = {
                    r["agent_id"]: r["status"] for r in restored.json()["agents"] if r["agent_id"] in ours
                }
                assert outcomes == {"shouter": "registered", "unit-converter": "skipped"}
                started = await other.post("/internal/yaml-agents/start", json={"yaml": exported})
                statuses = {
                    r["agent_id"]: r["status"] for r in started.json()["agents"] if r["agent_id"] in ours
                }
                assert statuses == {"unit-converter": "started", "shouter": "skipped"}
                # (other tests' invocation agents may have come along in the export)
                assert ours <= {r["agent_id"] for r in await agent_rows(second.base_url)}

                # 8. Ask again, on the second master: both agents answer.
                _, tool_output = await ask_converter(other, llm, 42)
                assert json.loads(tool_output)["result"] == {"value": 26.098, "unit": "mi"}
                before = len(llm.requests)
                llm.add_tool_call("shouter__shout", {"text": "restored"})
                llm.add_text("It says RESTORED.")
                asked = await other.post("/query", json={"query": "Shout 'restored'"})
                assert asked.json()["answer"] == "It says RESTORED."
                tool_messages = [m for m in llm.requests[before + 1]["messages"] if m["role"] == "tool"]
                assert "RESTORED" in tool_messages[-1]["content"]

                # The second master's export is the same workspace.
                assert load_workspace((await other.get("/internal/workspace/export")).text).agent("shouter")

                stopped = await other.post("/internal/yaml-agents/stop", json={})
                assert stopped.json()["agents"] == [
                    {"agent_id": "unit-converter", "status": "stopped", "handler": "agents.unit_converter"}
                ]

        stopped = await http.post("/internal/yaml-agents/stop", json={"agent_ids": ["unit-converter"]})
        assert stopped.json()["agents"][0]["status"] == "stopped"
        async with asyncio.timeout(90):
            while "unit-converter" in {r["agent_id"] for r in await agent_rows(first.base_url)}:
                await asyncio.sleep(0.05)


async def test_bad_code_twice_then_prose_are_422_with_reasons(
    first: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    body = {"name": "Unit converter", "description": "Converts units"}
    async with httpx.AsyncClient(base_url=first.base_url, timeout=60) as http:
        llm.add_text(fenced(BAD))
        llm.add_text(fenced(BAD))
        failed = await http.post("/generate-agent", json=body)
        assert failed.status_code == 422
        detail = failed.json()["detail"]
        assert detail["code"] == "checks_failed"
        assert detail["source"].startswith("# module: unit_converter")
        assert not checks_of(detail)["imports"] and not checks_of(detail)["tool_schemas"]

        llm.add_text(PROSE)
        llm.add_text(PROSE)
        prose = await http.post("/generate-agent", json=body)
        assert prose.status_code == 422
        assert prose.json()["detail"]["code"] == "no_code"
        assert "prose instead of code" in prose.json()["detail"]["message"]


async def test_a_generator_model_that_times_out_is_a_502(
    first: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    llm.add_text(fenced(UNIT_CONVERTER), delay=8)  # the master's OPENAGENT_LLM_TIMEOUT is 3 s, no retries
    async with httpx.AsyncClient(base_url=first.base_url, timeout=60) as http:
        response = await http.post("/generate-agent", json={"name": "Slow", "description": "Never arrives"})
    assert response.status_code == 502
    assert response.json()["detail"]["code"] == "llm_timeout"


async def test_generator_models_and_request_validation(first: MasterProcess) -> None:
    async with httpx.AsyncClient(base_url=first.base_url, timeout=30) as http:
        models = (await http.get("/generate-agent/models")).json()
        assert models["default_model"] in models["allowed_models"]
        unknown = await http.post("/generate-agent", json={"name": "x", "description": "y", "model": "gpt-0"})
        assert unknown.status_code == 400 and "not allowed" in unknown.json()["detail"]
        extra = await http.post("/generate-agent", json={"name": "x", "description": "y", "colour": "red"})
        assert extra.status_code == 422 and "colour" in extra.text
        collab = await http.post(
            "/generate-agent",
            json={"name": "x", "description": "y", "transport": "invocation", "requires_collaboration": True},
        )
        assert collab.status_code == 400
