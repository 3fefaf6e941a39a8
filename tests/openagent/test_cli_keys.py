"""``openagent keys create|list|revoke`` against a real master."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from openagent import cli
from tests.factories import InProcessMaster, in_process_master

KEY = "cli-keys-bootstrap"


@pytest.fixture
def workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    saved = dict(os.environ)
    for name in ("MASTER_BASE_URL", "MASTER_PORT", "MASTER_HOST", "OPENAGENT_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
async def master(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[InProcessMaster]:
    async with in_process_master(openagent_api_key=KEY) as m:
        monkeypatch.setenv("MASTER_BASE_URL", m.base_url)
        monkeypatch.setenv("OPENAGENT_API_KEY", KEY)
        yield m


async def run_cli(*argv: str) -> int:
    try:
        return await asyncio.to_thread(cli.main, list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)


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


async def test_a_client_key_cannot_manage_keys(
    master: InProcessMaster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_cli("keys", "create", "app", "--role", "client", "--json") == 0
    secret = json.loads(capsys.readouterr().out)["secret"]
    monkeypatch.setenv("OPENAGENT_API_KEY", secret)
    assert await run_cli("keys", "list") == 1
    err = capsys.readouterr().err
    assert "403" in err and "forbidden" in err and "'admin'" in err
