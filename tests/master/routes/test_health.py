"""Liveness and readiness, as a load balancer or Kubernetes sees them."""

from __future__ import annotations

import asyncio
import os
from urllib.parse import urlsplit

import httpx

from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import TEST_REDIS_URL, MasterProcess, free_port


async def test_ready_when_redis_answers(master: MasterProcess) -> None:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=10) as http:
        assert (await http.get("/health")).json() == {"status": "ok"}
        response = await http.get("/ready")
    assert response.status_code == 200 and response.json()["status"] == "ready"


async def test_not_ready_names_redis_while_alive(scripted_llm: ScriptedOpenAIServer) -> None:
    """Without Redis, /ready is 503 naming it, not its address (that goes to the log), and /health
    (liveness) stays 200."""
    redis_port = free_port()
    env = master_env(scripted_llm, REDIS_URL=f"redis://127.0.0.1:{redis_port}/0", OPENAGENT_API_KEY="k3y-k3y")
    async with MasterProcess(env) as m, httpx.AsyncClient(base_url=m.base_url, timeout=10) as http:
        response = await http.get("/ready")  # no API key needed, like /health
        body = response.json()
        assert response.status_code == 503 and body["status"] == "unavailable"
        assert body["failing"] == ["redis"] and "session store (Redis) is unavailable" in body["detail"]
        assert str(redis_port) not in response.text and "127.0.0.1" not in response.text
        async with asyncio.timeout(30):  # the cause is in the master's log
            while (
                f"master.health: not ready: session store unavailable (Redis): Error 111 connecting to 127.0.0.1:{redis_port}"
                not in m.log()
            ):
                await asyncio.sleep(0.05)
        assert (await http.get("/health")).status_code == 200


async def test_ready_shows_the_isolation_layers_to_an_administrator_only(
    scripted_llm: ScriptedOpenAIServer,
) -> None:
    """An administrator's key adds the layers between agent code and the master's secrets; no
    key, a wrong one, or a key of another role sees none of it."""
    admin = {"Authorization": "Bearer k3y-k3y"}
    env = master_env(scripted_llm, OPENAGENT_API_KEY="k3y-k3y")
    async with MasterProcess(env) as m, httpx.AsyncClient(base_url=m.base_url, timeout=10) as http:
        made = await http.post("/keys", json={"name": "ops", "role": "client"}, headers=admin)
        client = {"Authorization": f"Bearer {made.json()['secret']}"}
        for headers in ({}, {"Authorization": "Bearer wrong"}, client):
            response = await http.get("/ready", headers=headers)
            assert response.status_code == 200 and "isolation" not in response.json(), headers
            assert "uid" not in response.text
        layers = (await http.get("/ready", headers=admin)).json()["isolation"]
    assert set(layers) == {
        "own_key",
        "own_user",
        "mount_namespace",
        "non_dumpable",
        "limits",
        "redis_password",
        "network_namespace",
    }
    assert layers["own_key"]["active"] is True
    # The tests run as root (CI) or not: the answer says which, and why.
    if os.geteuid() == 0:
        assert layers["own_user"]["active"] is True and "one uid per agent" in layers["own_user"]["detail"]
    else:
        assert layers["own_user"]["active"] is False and "refused" in layers["own_user"]["detail"]
    assert layers["redis_password"]["active"] is bool(urlsplit(TEST_REDIS_URL).password)
    assert layers["network_namespace"]["active"] is False
    assert "k3y-k3y" not in str(layers)
