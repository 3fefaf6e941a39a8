"""Auto mode spawns a saved agent through the sandbox: deploy, wait for it to register, use it.

A real master, the real ``kubernetes`` client against the fake API server, and a fake kubelet
that runs each new agent Pod's ConfigMap code as a local process with the Pod's environment.
"""

from __future__ import annotations

import json
from pathlib import Path

from openagent.testing import ScriptedOpenAIServer
from tests.factories import agents_root as agents_root_layout
from tests.factories import free_port
from tests.master.routes.test_sandbox import NS, sandbox_master
from tests.master.sandbox.fake_kubernetes import fake_kubelet, fake_kubernetes, write_kubeconfig

API_KEY = "sandbox-master-key"


SAVED_ECHO = '''
"""A saved WebSocket agent, in the shape the agent builder saves (a literal AGENT_ID)."""
import os

from openagent import OrchestratorActionAgent, ToolSchema, run_action_agent

AGENT_ID = "saved-echo"
ECHO = ToolSchema(
    name="echo",
    description="Echo the text back",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


async def handle(tool_name, arguments):
    return {"echo": arguments["text"], "pid": os.getpid()}


if __name__ == "__main__":
    run_action_agent(OrchestratorActionAgent(AGENT_ID, [ECHO], handle))
'''


def agents_root(tmp_path: Path) -> Path:
    """An agents root with one saved agent, and a system agent that is never spawned (not saved)."""
    root = agents_root_layout(tmp_path / "root")
    (root / "agents" / "saved_echo.py").write_text(SAVED_ECHO)
    (root / "system_agents" / "system_echo.py").write_text(SAVED_ECHO.replace("saved-echo", "system-echo"))
    return root


async def test_auto_mode_spawns_a_saved_agent_and_uses_it(llm: ScriptedOpenAIServer, tmp_path: Path) -> None:
    port = free_port()
    async with fake_kubernetes() as (fake, url), fake_kubelet(fake, NS, tmp_path) as kubelet:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
        env = {
            "OPENAGENT_AGENTS_ROOT": str(agents_root(tmp_path)),
            "OPENAGENT_K8S_MASTER_WS": f"ws://127.0.0.1:{port}/ws",
        }
        async with sandbox_master(llm, kubeconfig, port=port, **env) as http:
            llm.add_tool_call("spawn_agent", {"agent_id": "saved-echo"})
            llm.add_tool_call("saved-echo__echo", {"text": "hello from a spawned agent"})
            llm.add_text("The spawned agent echoed the greeting.")
            response = await http.post("/query", json={"query": "Greet via saved-echo", "auto_mode": True})
            answer = response.json()
            assert answer["success"], answer
            assert answer["answer"] == "The spawned agent echoed the greeting."
            assert {"agent_id": "saved-echo", "tool_name": "echo"} in answer["agents_used"]

            first_offer = {t["function"]["name"]: t for t in llm.requests[0]["tools"]}
            assert first_offer["spawn_agent"]["function"]["parameters"]["properties"]["agent_id"]["enum"] == [
                "saved-echo"
            ]
            spawned = json.loads(llm.requests[1]["messages"][-1]["content"])["result"]
            assert spawned == {"agent_id": "saved-echo", "status": "running", "tools": ["saved-echo__echo"]}
            assert "saved-echo__echo" in {t["function"]["name"] for t in llm.requests[1]["tools"]}
            echoed = json.loads(llm.requests[2]["messages"][-1]["content"])["result"]
            assert echoed["echo"] == "hello from a spawned agent"

            # Deployed through the sandbox path: its own Pod, its code from agents/saved_echo.py.
            (pod,) = fake.live("pods", NS)
            assert pod["metadata"]["annotations"]["openagent.io/code"] == "module:agents.saved_echo"
            assert list(kubelet.processes) == [pod["metadata"]["name"]]
            # It registered with a key of its own (role agent, its id only), never the master's.
            key = kubelet.environments[pod["metadata"]["name"]]["OPENAGENT_API_KEY"]
            assert key != API_KEY
            me = (await http.get("/whoami", headers={"Authorization": f"Bearer {key}"})).json()
            assert (me["role"], me["agent_ids"]) == ("agent", ["saved-echo"])
            row = next(
                r for r in (await http.get("/agents")).json()["agents"] if r["agent_id"] == "saved-echo"
            )
            assert row["connection_type"] == "websocket" and row["sandbox"]["placement"] == "new_pod"

            # Running now: not offered for spawning any more.
            llm.add_text("Nothing to spawn.")
            await http.post("/query", json={"query": "again", "auto_mode": True})
            assert "spawn_agent" not in {t["function"]["name"] for t in llm.requests[-1].get("tools") or []}


async def test_a_spawn_that_does_not_register_ends_the_step_with_a_clear_error(
    llm: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    async with fake_kubernetes() as (fake, url):  # no kubelet: the Pod never runs
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
        env = {
            "OPENAGENT_AGENTS_ROOT": str(agents_root(tmp_path)),
            "ORCHESTRATOR_AUTO_SPAWN_WAIT_SECONDS": "1",
        }
        async with sandbox_master(llm, kubeconfig, **env) as http:
            llm.add_tool_call("spawn_agent", {"agent_id": "saved-echo"})
            llm.add_text("The agent could not be started.")
            answer = (await http.post("/query", json={"query": "Greet", "auto_mode": True})).json()
            assert answer["success"] and answer["answer"] == "The agent could not be started."
            error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
            assert "'saved-echo' was deployed" in error
            assert "did not register within 1 s (ORCHESTRATOR_AUTO_SPAWN_WAIT_SECONDS)" in error
            assert len(fake.live("pods", NS)) == 1

            # Without auto mode nothing is offered for spawning.
            llm.add_text("Plain answer.")
            await http.post("/query", json={"query": "plain"})
            assert "spawn_agent" not in {t["function"]["name"] for t in llm.requests[-1].get("tools") or []}
