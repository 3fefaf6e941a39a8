"""The demo is honest: with the demo LLM (what ``scripts/run.sh`` starts when no LLM is configured)
every model a user sees is ``openagent-demo``, labelled a demo, and the agent builder works offline:
generate → save → discover → run → ask."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from master.orchestration.model_catalog import DEMO_MODEL as MASTER_DEMO_MODEL
from openagent.testing import DEMO_LABEL, DEMO_MODEL, ScriptedOpenAIServer, demo_handler
from tests.conftest import master_env
from tests.factories import MasterProcess, agents_root

ROOT = Path(__file__).resolve().parent.parent
DEMO_ENV = {
    "OPENAGENT_CHAT_MODELS": DEMO_MODEL,
    "ORCHESTRATOR_MODEL": DEMO_MODEL,
    "AGENT_GENERATOR_MODEL": DEMO_MODEL,
    "SUMMARIZER_MODEL": DEMO_MODEL,
}
"""What scripts/run.sh exports when it starts the demo LLM."""


@pytest.fixture(scope="module")
def demo_llm() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(models=(DEMO_MODEL,)) as server:
        server.set_handler(demo_handler)
        yield server


@pytest.fixture(scope="module")
def demo_master(
    demo_llm: ScriptedOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MasterProcess]:
    root = agents_root(tmp_path_factory.mktemp("demo-repo"))
    env = master_env(demo_llm, OPENAGENT_AGENTS_ROOT=str(root), **DEMO_ENV)
    with MasterProcess(env) as process:
        yield process


def test_run_sh_names_the_demo_for_what_it_is() -> None:
    script = (ROOT / "scripts" / "run.sh").read_text()
    for name, value in DEMO_ENV.items():
        assert f"{name}={value}" in script
    assert MASTER_DEMO_MODEL == DEMO_MODEL


async def test_every_model_a_user_sees_is_the_demo(
    demo_master: MasterProcess, demo_llm: ScriptedOpenAIServer
) -> None:
    async with httpx.AsyncClient(base_url=demo_master.base_url, timeout=60) as http:
        models = (await http.get("/query/orchestrator-models")).json()
        assert (models["default_model"], models["allowed_models"]) == (DEMO_MODEL, [DEMO_MODEL])
        assert models["model_labels"] == {DEMO_MODEL: DEMO_LABEL}
        answer = await http.post("/query", json={"query": "hello"})
        assert answer.status_code == 200, answer.text
        assert "demo LLM" in answer.json()["answer"]
        session = (await http.get(f"/sessions/{answer.json()['session_id']}")).json()
        assert {turn.get("model") for turn in session["turns"] if "model" in turn} == {DEMO_MODEL}
    assert {request["model"] for request in demo_llm.requests} == {DEMO_MODEL}
    assert "gpt" not in json.dumps(models)


async def test_the_builder_works_offline_with_the_demo(demo_master: MasterProcess) -> None:
    async with httpx.AsyncClient(base_url=demo_master.base_url, timeout=120) as http:
        generated = await http.post(
            "/generate-agent",
            json={"name": "Echo desk", "description": "Says things back", "tools": ["repeat", "shout"]},
        )
        assert generated.status_code == 200, generated.text
        body = generated.json()
        assert body["model"] == DEMO_MODEL and body["attempts"] == 1
        assert all(check["passed"] for check in body["checks"])
        assert [tool["name"] for tool in body["tools"]] == ["repeat", "shout"]
        assert "demo LLM, not a model" in body["source"]

        saved = await http.post("/save-agent", json={"module": body["module"], "source": body["source"]})
        assert saved.status_code == 200, saved.text
        found = (await http.get("/agents/discover")).json()
        [row] = [agent for agent in found["agents"] if agent["agent_id"] == body["agent_id"]]
        workspace = {
            "version": 1,
            "agents": [{"agent_id": row["agent_id"], "handler": row["handler"], "tools": row["tools"]}],
            "links": [{"source": row["agent_id"]}],
        }
        started = await http.post("/internal/yaml-agents/start", json={"yaml": json.dumps(workspace)})
        assert started.status_code == 200, started.text
        asked = await http.post("/query", json={"query": "shout it", "allowed_agent_ids": [body["agent_id"]]})
        assert asked.status_code == 200, asked.text
        assert asked.json()["agents_used"] == [{"agent_id": body["agent_id"], "tool_name": "shout"}]
