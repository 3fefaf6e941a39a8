"""The key of each agent the master starts is its own, never the master's (review of issue 38).

The master's ``OPENAGENT_API_KEY`` is in its environment (as ``run.sh`` and the images set it):
neither the runner's configuration nor a started agent's process may pick it up, even when the
agent's own key cannot be made.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import httpx
import pytest

from master.builder.credentials import AgentKeys
from tests.factories import in_process_master

MASTER_KEY = "master-bootstrap-key-in-the-environment"
MODULE = """
from openagent import ToolSchema

TOOLS = [ToolSchema(name="go", description="Do it", parameters={"type": "object", "properties": {}})]

async def handle_tool(tool_name, arguments):
    return {"ok": True}
"""


async def test_an_agent_whose_key_cannot_be_made_is_not_started_with_the_masters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "keyless.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.setenv("OPENAGENT_API_KEY", MASTER_KEY)

    async def no_key(self: AgentKeys, agent_id: str, tenant: str) -> tuple[str, str]:
        raise RuntimeError("the key store is down")

    monkeypatch.setattr(AgentKeys, "make", no_key)
    async with in_process_master(openagent_agents_root=str(tmp_path)) as master:
        runner = master.services.builder.workspaces.runner
        assert runner.config.api_key == ""  # "" is no key: never OPENAGENT_API_KEY of the environment
        async with httpx.AsyncClient(base_url=master.base_url, timeout=120) as http:
            started = await http.post(
                "/internal/yaml-agents/start",
                json={"yaml": "version: 1\nagents:\n  - agent_id: keyless\n    handler: agents.keyless\n"},
            )
            assert started.status_code == 200, started.text
            [row] = started.json()["agents"]
            assert row["status"] == "failed", row
            assert "could not make its key: the key store is down" in row["reason"]
            assert runner.running() == {}  # no process at all, so none holding the master's key
