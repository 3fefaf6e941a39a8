"""``openagent keys create|list|revoke`` against a real master."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.factories import InProcessMaster, in_process_master
from tests.openagent.conftest import PointCli, run_cli

KEY = "cli-keys-bootstrap"


@pytest.fixture
async def master(point_cli: PointCli) -> AsyncIterator[InProcessMaster]:
    async with in_process_master(openagent_api_key=KEY) as m:
        point_cli(m.base_url, KEY)
        yield m


async def test_create_list_and_revoke(master: InProcessMaster, capsys: pytest.CaptureFixture[str]) -> None:
    assert await run_cli("keys", "create", "weather bot", "--role", "agent", "--agent-id", "weather-*") == 0
    out = capsys.readouterr().out
    secret = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("secret: "))
    key_id = out.split()[1]
    async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
        me = (await http.get("/whoami", headers={"Authorization": f"Bearer {secret}"})).json()
        assert (me["name"], me["role"], me["agent_ids"]) == ("weather bot", "agent", ["weather-*"])

        assert await run_cli("keys", "list") == 0
        listed = capsys.readouterr().out
        assert key_id in listed and "weather bot" in listed and "weather-*" in listed and secret not in listed

        assert await run_cli("keys", "revoke", key_id) == 0
        assert f"revoked {key_id}" in capsys.readouterr().out
        refused = await http.get("/whoami", headers={"Authorization": f"Bearer {secret}"})
        assert refused.status_code == 401

    assert await run_cli("keys", "revoke", key_id) == 1
    assert "not_found" in capsys.readouterr().err


async def test_create_a_key_that_approves_tools(
    master: InProcessMaster, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = (
        "keys",
        "create",
        "treasurer",
        "--role",
        "client",
        "--approves",
        "bank__*",
        "--approves",
        "pay__x",
    )
    assert await run_cli(*argv) == 0
    out = capsys.readouterr().out
    secret = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("secret: "))
    key_id = out.split()[1]
    try:
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            me = (await http.get("/whoami", headers={"Authorization": f"Bearer {secret}"})).json()
            assert me["approves"] == ["bank__*", "pay__x"]
        assert await run_cli("keys", "list") == 0
        assert "approves bank__*,pay__x" in capsys.readouterr().out
    finally:
        assert await run_cli("keys", "revoke", key_id) == 0


async def test_a_client_key_cannot_manage_keys(
    master: InProcessMaster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_cli("keys", "create", "app", "--role", "client", "--json") == 0
    secret = json.loads(capsys.readouterr().out)["secret"]
    monkeypatch.setenv("OPENAGENT_API_KEY", secret)
    assert await run_cli("keys", "list") == 1
    err = capsys.readouterr().err
    assert "403" in err and "forbidden" in err and "'admin'" in err
