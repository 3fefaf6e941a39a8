"""The key of each agent the master starts is its own, never the master's (review of issue 38).

The master's ``OPENAGENT_API_KEY`` is in its environment (as ``run.sh`` and the images set it):
neither the runner's configuration nor a started agent's process may pick it up, even when the
agent's own key cannot be made.
"""

from __future__ import annotations

import os
import pwd
import textwrap
from pathlib import Path

import httpx
import pytest

from master.builder.credentials import AgentKeys
from openagent.workspace.isolation import AgentUsers
from tests.factories import in_process_master

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="agent code starts (with uids of its own) only from a root master"
)

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


async def test_a_start_that_fails_after_the_key_was_made_revokes_it_and_keeps_the_other_outcomes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No uid free (or the module not copied) is that agent's ``failed`` outcome, naming why; its
    key is revoked, and the agents started beside it keep their outcomes (no 500)."""
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "keyed.py").write_text(textwrap.dedent(MODULE))
    made: dict[str, str] = {}
    revoked: list[str] = []
    make, revoke, next_uid = AgentKeys.make, AgentKeys.revoke, AgentUsers.next_uid

    async def recording_make(self: AgentKeys, agent_id: str, tenant: str) -> tuple[str, str]:
        key_id, secret = await make(self, agent_id, tenant)
        made[agent_id] = key_id
        return key_id, secret

    async def recording_revoke(self: AgentKeys, key_id: str) -> None:
        revoked.append(key_id)
        await revoke(self, key_id)

    calls = 0

    async def second_has_no_uid(self: AgentUsers, busy: set[int]) -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("every uid of 200000+2 is in use")
        return await next_uid(self, busy)

    monkeypatch.setattr(AgentKeys, "make", recording_make)
    monkeypatch.setattr(AgentKeys, "revoke", recording_revoke)
    monkeypatch.setattr(AgentUsers, "next_uid", second_has_no_uid)
    yaml = "version: 1\nagents:\n" + "".join(
        f"  - agent_id: {agent_id}\n    handler: agents.keyed\n" for agent_id in ("keyed-a", "keyed-b")
    )
    async with in_process_master(openagent_agents_root=str(tmp_path)) as master:
        async with httpx.AsyncClient(base_url=master.base_url, timeout=120) as http:
            started = await http.post("/internal/yaml-agents/start", json={"yaml": yaml})
            assert started.status_code == 200, started.text
            rows = {row["agent_id"]: row for row in started.json()["agents"]}
            failed = [agent_id for agent_id, row in rows.items() if row["status"] == "failed"]
            assert len(failed) == 1, rows
            [ok] = set(rows) - set(failed)
            assert rows[ok]["status"] == "started", rows
            assert "could not be prepared: every uid of 200000+2 is in use" in rows[failed[0]]["reason"]
            assert revoked == [made[failed[0]]]  # the failed agent's key, and only it
            stopped = await http.post("/internal/yaml-agents/stop", json={"agent_ids": [ok]})
            assert stopped.json()["agents"][0]["status"] == "stopped"
            assert sorted(revoked) == sorted(made.values())


async def test_a_uid_range_holding_an_existing_user_is_refused_clearly(tmp_path: Path) -> None:
    """An agent under an existing user's uid would own that user's files and processes: no agent
    code is started, and the outcome names the user and the settings to change."""
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "keyed.py").write_text(textwrap.dedent(MODULE))
    nobody = pwd.getpwnam("nobody")
    settings = {"openagent_agent_uid_base": nobody.pw_uid, "openagent_agent_uid_count": 1}
    async with in_process_master(openagent_agents_root=str(tmp_path), **settings) as master:
        async with httpx.AsyncClient(base_url=master.base_url, timeout=120) as http:
            started = await http.post(
                "/internal/yaml-agents/start",
                json={"yaml": "version: 1\nagents:\n  - agent_id: keyed-n\n    handler: agents.keyed\n"},
            )
            [row] = started.json()["agents"]
            assert row["status"] == "failed", row
            assert f"holds the existing user 'nobody' (uid {nobody.pw_uid})" in row["reason"]
            assert "OPENAGENT_AGENT_UID_BASE" in row["reason"]
