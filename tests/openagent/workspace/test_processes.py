"""``openagent.workspace.processes``: YAML agents in supervised child processes; the master survives their code."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from openagent import ClientConfig
from openagent.testing import ScriptedOpenAIServer
from openagent.workspace import load_workspace
from openagent.workspace.processes import AgentCredential, ProcessAgentRunner
from tests.conftest import master_env
from tests.factories import MasterProcess, agent_rows

TOOL = """
from openagent import ToolSchema

TOOLS = [ToolSchema(name="go", description="Do it", parameters={"type": "object", "properties": {}})]

async def handle_tool(tool_name, arguments):
    import os
    {action}
    return {"ok": True, "openai_key": os.environ.get("OPENAI_API_KEY"), "uid": os.getuid()}
"""

MODULES = {
    "good": TOOL.replace("{action}", "pass"),
    # Handlers that end their process mid-call.
    "handler_exit": TOOL.replace("{action}", "raise SystemExit(3)"),
    "handler_interrupt": TOOL.replace("{action}", "raise KeyboardInterrupt"),
    "handler_os_exit": TOOL.replace("{action}", "os._exit(0)"),
    # Modules whose import never yields an agent.
    "import_exit": "raise SystemExit(3)\n",
    "import_interrupt": "raise KeyboardInterrupt\n",
    "import_os_exit": "import os\nos._exit(0)\n",
    "import_hang": "import threading\nthreading.Event().wait()\n",
    "import_alloc": "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 1024 * 1024))\n",
}


def workspace_yaml(*modules: str) -> str:
    agents = "".join(
        f"  - agent_id: iso-{name.replace('_', '-')}\n    handler: agents.iso_{name}\n" for name in modules
    )
    return f"version: 1\nagents:\n{agents}"


@pytest.fixture(scope="module")
def isolated_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("isolation")
    (root / "agents").mkdir()
    for name, source in MODULES.items():
        (root / "agents" / f"iso_{name}.py").write_text(textwrap.dedent(source))
    return root


@pytest.fixture(scope="module")
def isolated_master(scripted_llm: ScriptedOpenAIServer, isolated_root: Path) -> Iterator[MasterProcess]:
    env = master_env(
        scripted_llm, OPENAGENT_AGENTS_ROOT=str(isolated_root), OPENAI_API_KEY="sk-master-secret"
    )
    with MasterProcess(env) as process:
        yield process


async def alive(master: MasterProcess) -> None:
    assert master.process is not None and master.process.poll() is None, "the master exited"
    async with httpx.AsyncClient(timeout=30) as http:
        assert (await http.get(f"{master.base_url}/health")).status_code == 200


async def test_import_time_escapes_fail_their_agent_and_leave_the_master_up(
    isolated_master: MasterProcess,
) -> None:
    bad = ("import_exit", "import_interrupt", "import_os_exit", "import_hang", "import_alloc")
    async with httpx.AsyncClient(base_url=isolated_master.base_url, timeout=180) as http:
        started = await http.post("/internal/yaml-agents/start", json={"yaml": workspace_yaml("good", *bad)})
        assert started.status_code == 200, started.text
        rows = {row["agent_id"]: row for row in started.json()["agents"]}
        assert rows["iso-good"]["status"] == "started"
        for name in bad:
            assert rows[f"iso-{name.replace('_', '-')}"]["status"] == "failed", rows
        assert "SystemExit: 3" in rows["iso-import-exit"]["reason"]
        assert "KeyboardInterrupt" in rows["iso-import-interrupt"]["reason"]
        assert "exited with code 0 before connecting" in rows["iso-import-os-exit"]["reason"]
        assert "did not connect within" in rows["iso-import-hang"]["reason"]
        assert "MemoryError" in rows["iso-import-alloc"]["reason"]
        running = (await http.get("/internal/yaml-agents")).json()
        assert "iso-good" in json.dumps(running) and "iso-import-hang" not in json.dumps(running)
        await http.post("/internal/yaml-agents/stop", json={"agent_ids": ["iso-good"]})
    await alive(isolated_master)


@pytest.mark.parametrize("name", ["handler_exit", "handler_interrupt", "handler_os_exit"])
async def test_a_handler_that_ends_its_process_fails_the_call_not_the_master(
    isolated_master: MasterProcess, llm: ScriptedOpenAIServer, name: str
) -> None:
    agent_id = f"iso-{name.replace('_', '-')}"
    async with httpx.AsyncClient(base_url=isolated_master.base_url, timeout=180) as http:
        started = await http.post("/internal/yaml-agents/start", json={"yaml": workspace_yaml(name)})
        assert started.json()["agents"][0]["status"] == "started", started.text
        before = len(llm.requests)
        llm.add_tool_call(f"{agent_id}__go", {})
        llm.add_text("The tool failed.")
        asked = await http.post("/query", json={"query": "Do it", "allowed_agent_ids": [agent_id]})
        assert asked.status_code == 200, asked.text
        tool_messages = [m for m in llm.requests[before + 1]["messages"] if m["role"] == "tool"]
        assert '"ok"' not in tool_messages[-1]["content"]  # the call failed: the process ended
        await alive(isolated_master)
        # The supervisor starts the agent again: it registers anew.
        async with asyncio.timeout(90):
            while agent_id not in {row["agent_id"] for row in await agent_rows(isolated_master.base_url)}:
                await asyncio.sleep(0.05)
        stopped = await http.post("/internal/yaml-agents/stop", json={"agent_ids": [agent_id]})
        assert stopped.json()["agents"][0]["status"] == "stopped"
    await alive(isolated_master)


async def test_agent_code_sees_none_of_the_masters_secrets(
    isolated_master: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    async with httpx.AsyncClient(base_url=isolated_master.base_url, timeout=180) as http:
        started = await http.post("/internal/yaml-agents/start", json={"yaml": workspace_yaml("good")})
        assert started.json()["agents"][0]["status"] in ("started", "already_running"), started.text
        before = len(llm.requests)
        llm.add_tool_call("iso-good__go", {})
        llm.add_text("Done.")
        asked = await http.post("/query", json={"query": "Do it", "allowed_agent_ids": ["iso-good"]})
        assert asked.status_code == 200, asked.text
        tool_messages = [m for m in llm.requests[before + 1]["messages"] if m["role"] == "tool"]
        content = tool_messages[-1]["content"]
        result = json.loads(content)["result"]
        assert result["ok"] is True, content
        assert result["openai_key"] is None
        if os.geteuid() == 0:
            assert result["uid"] >= 200000  # a user of its own (the OPENAGENT_AGENT_UID_BASE range)
        await http.post("/internal/yaml-agents/stop", json={"agent_ids": ["iso-good"]})


async def no_key_expected(agent_id: str) -> AgentCredential:
    raise AssertionError(f"a key was made for {agent_id}, whose module is refused")


async def test_the_runner_reports_module_problems_without_starting_a_process(
    master: MasterProcess, tmp_path: Path
) -> None:
    (tmp_path / "agents").mkdir()
    outside = tmp_path / "outside.py"
    outside.write_text(textwrap.dedent(MODULES["good"]))
    (tmp_path / "agents" / "escape.py").symlink_to(outside)
    runner = ProcessAgentRunner(
        ClientConfig(master_ws=master.ws_url), root=tmp_path, workdir=tmp_path / "work"
    )
    workspace = load_workspace(
        "version: 1\nagents:\n"
        "  - agent_id: iso-missing\n    handler: agents.nowhere\n"
        "  - agent_id: iso-escape\n    handler: agents.escape\n"
        "  - agent_id: iso-http\n    transport: invocation\n    invocation_base_url: http://127.0.0.1:9\n"
    )
    try:
        outcomes = {o.agent_id: o for o in await runner.start(workspace, no_key_expected)}
        assert outcomes["iso-missing"].status == "failed"
        assert "no module 'agents.nowhere'" in outcomes["iso-missing"].reason
        assert outcomes["iso-escape"].status == "failed"
        assert "symlink out of agents/" in outcomes["iso-escape"].reason
        assert outcomes["iso-http"].status == "skipped"
        assert runner.running() == {}
        assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir())
    finally:
        await runner.aclose()
