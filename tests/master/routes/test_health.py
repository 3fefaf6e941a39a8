"""Liveness and readiness, as a load balancer or Kubernetes sees them."""

from __future__ import annotations

import httpx

from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import MasterProcess, free_port


async def test_ready_when_redis_answers(master: MasterProcess) -> None:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=10) as http:
        assert (await http.get("/health")).json() == {"status": "ok"}
        response = await http.get("/ready")
    assert response.status_code == 200 and response.json()["status"] == "ready"


async def test_not_ready_names_redis_while_alive(scripted_llm: ScriptedOpenAIServer) -> None:
    """Without Redis, /ready is 503 naming it, and /health (liveness) stays 200."""
    env = master_env(
        scripted_llm, REDIS_URL=f"redis://127.0.0.1:{free_port()}/0", OPENAGENT_API_KEY="k3y-k3y"
    )
    async with MasterProcess(env) as m, httpx.AsyncClient(base_url=m.base_url, timeout=10) as http:
        response = await http.get("/ready")  # no API key needed, like /health
        body = response.json()
        assert response.status_code == 503 and body["status"] == "unavailable"
        assert body["failing"] == ["redis"] and "Redis" in body["detail"]
        assert (await http.get("/health")).status_code == 200
