"""``master/routes/workspace.py`` over HTTP: bad YAML refused early, per-agent restore outcomes, schema."""

from __future__ import annotations

import json

import httpx

from openagent.workspace import json_schema
from tests.factories import MasterProcess


async def test_bad_yaml_is_refused_with_line_and_field(master: MasterProcess) -> None:
    bomb = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    bomb += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 12)]
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
        for path in ("/internal/yaml-agents/start", "/internal/workspace/restore"):
            response = await http.post(path, json={"yaml": "\n".join(bomb)})
            assert response.status_code == 400
            assert response.json()["detail"]["code"] == "yaml_bomb"

            unknown = await http.post(
                path, json={"yaml": "version: 1\nagents:\n  - agent_id: a\n    toolz: []\n"}
            )
            assert unknown.status_code == 400
            [problem] = unknown.json()["detail"]["problems"]
            assert problem == {"line": 4, "field": "agents[0].toolz", "message": "unknown field 'toolz'"}

        huge = {"yaml": "# " + "x" * (50 * 1024 * 1024)}
        response = await http.post("/internal/yaml-agents/start", content=json.dumps(huge))
        assert response.status_code == 413
        medium = await http.post("/internal/workspace/restore", json={"yaml": "# " + "x" * (5 * 1024 * 1024)})
        assert medium.status_code == 413
        assert medium.json()["detail"]["code"] == "too_large"


async def test_restore_answers_per_agent(master: MasterProcess) -> None:
    text = """\
version: 1
agents:
  - agent_id: restore-down
    transport: invocation
    invocation_base_url: http://127.0.0.1:9
    tools: [{name: ping, description: Ping}]
  - agent_id: restore-bad-schema
    transport: invocation
    invocation_base_url: http://127.0.0.1:9
    tools: [{name: ping, parameters: {type: object, properties: {n: {type: not-a-type}}}}]
  - agent_id: restore-ws
    handler: agents.whatever
  - agent_id: restore.sq
    transport: invocation
    invocation_base_url: http://127.0.0.1:9
    tools: [{name: ping, description: Ping}]
  - agent_id: restore_sq
    transport: invocation
    invocation_base_url: http://127.0.0.1:9
    tools: [{name: ping, description: Ping}]
"""
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        response = await http.post("/internal/workspace/restore", json={"yaml": text})
        assert response.status_code == 200, response.text
        rows = {row["agent_id"]: row for row in response.json()["agents"]}
        assert rows["restore-down"]["status"] == "unreachable"
        assert "/health failed" in rows["restore-down"]["reason"]
        assert rows["restore-bad-schema"]["status"] == "invalid"
        assert rows["restore-ws"]["status"] == "skipped"
        # The rules of POST /register hold on restore too: restore_sq__ping is restore.sq's function name.
        assert rows["restore.sq"]["status"] == "unreachable"
        assert rows["restore_sq"]["status"] == "invalid"
        assert "restore.sq" in rows["restore_sq"]["reason"]
        skipped = await http.post("/internal/workspace/restore", json={"yaml": text, "register_http": False})
        assert {row["status"] for row in skipped.json()["agents"]} == {"skipped"}
        for agent_id in ("restore-down", "restore-bad-schema", "restore.sq", "restore_sq"):
            await http.post("/unregister", json={"agent_id": agent_id})


async def test_the_schema_endpoint_serves_the_published_schema(master: MasterProcess) -> None:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        assert (await http.get("/workspace/schema")).json() == json_schema()
