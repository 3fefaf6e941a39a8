"""The user's path: a real master, the sample weather agent as a process, SDK clients, Redis, scripted LLM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openagent import ClientConfig, OrchestratorActionAgent, QueryClient, ToolSchema
from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import ROOT, WEATHER_TOOL, MasterProcess, agent_rows, free_port, serve_app


def fake_open_meteo() -> Starlette:
    async def search(request: Request) -> JSONResponse:
        if request.query_params["name"].lower() != "paris":
            return JSONResponse({"results": []})
        return JSONResponse(
            {"results": [{"name": "Paris", "country": "France", "latitude": 48.85, "longitude": 2.35}]}
        )

    async def forecast(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "current": {
                    "temperature_2m": 21.5,
                    "relative_humidity_2m": 40,
                    "wind_speed_10m": 7.2,
                    "weather_code": 1,
                }
            }
        )

    return Starlette(routes=[Route("/search", search), Route("/forecast", forecast)])


@pytest.fixture
async def open_meteo() -> AsyncIterator[str]:
    async with serve_app(fake_open_meteo()) as url:
        yield url


def config_for(master: MasterProcess, **overrides: Any) -> ClientConfig:
    return ClientConfig(master_ws=master.ws_url, api_key=None, reconnect_max_delay=0.5, **overrides)


async def wait_for_agent(
    master: MasterProcess, agent_id: str, present: bool = True, timeout: float = 90
) -> None:
    async with asyncio.timeout(timeout):
        while (agent_id in {r["agent_id"] for r in await agent_rows(master.base_url)}) != present:
            await asyncio.sleep(0.05)


def spawn_python(code: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Run ``code`` in a new Python process with the repo on its path."""
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT), **env})


@pytest.fixture
def weather_process(master: MasterProcess, open_meteo: str) -> Iterator[subprocess.Popen[bytes]]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MASTER_WS": master.ws_url,
        "WEATHER_GEOCODING_URL": f"{open_meteo}/search",
        "WEATHER_FORECAST_URL": f"{open_meteo}/forecast",
    }
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "sample_agents" / "action_weather.py")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield process
    process.kill()
    process.wait(timeout=10)


async def test_weather_query_end_to_end_with_follow_up(
    master: MasterProcess, llm: ScriptedOpenAIServer, weather_process: subprocess.Popen[bytes]
) -> None:
    await wait_for_agent(master, "weather-agent")
    row = next(r for r in await agent_rows(master.base_url) if r["agent_id"] == "weather-agent")
    assert [t["name"] for t in row["tools"]] == ["get_weather"]

    llm.add_tool_call("weather-agent__get_weather", {"city": "Paris"})
    llm.add_text("It is 21.5 °C and mainly clear in Paris.")
    async with httpx.AsyncClient(base_url=master.base_url, timeout=20) as http:
        first = (await http.post("/query", json={"query": "What is the weather in Paris?"})).json()
        assert first["success"], first
        assert first["answer"] == "It is 21.5 °C and mainly clear in Paris."
        assert first["agents_used"] == [{"agent_id": "weather-agent", "tool_name": "get_weather"}]
        tool_result = json.loads(llm.requests[1]["messages"][-1]["content"])["result"]
        assert tool_result["temperature_c"] == 21.5 and tool_result["conditions"] == "mainly clear"

        llm.add_text("Yes, light clothes are fine.")
        follow = (
            await http.post("/query", json={"query": "Light clothes?", "session_id": first["session_id"]})
        ).json()
        assert follow["session_id"] == first["session_id"]
        replay = llm.requests[2]["messages"]
        assert {"role": "user", "content": "What is the weather in Paris?"} in replay
        assert any("mainly clear" in str(m.get("content")) for m in replay if m["role"] == "assistant")


async def test_unknown_city_is_a_tool_error_the_model_reports(
    master: MasterProcess, llm: ScriptedOpenAIServer, weather_process: subprocess.Popen[bytes]
) -> None:
    await wait_for_agent(master, "weather-agent")
    llm.add_tool_call("weather-agent__get_weather", {"city": "Atlantis"})
    llm.add_text("I could not find Atlantis.")
    async with httpx.AsyncClient(base_url=master.base_url, timeout=20) as http:
        body = (await http.post("/query", json={"query": "Weather in Atlantis?"})).json()
    assert body["success"]
    error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
    assert "unknown city 'Atlantis'" in error


async def test_agent_process_killed_mid_call(
    master: MasterProcess, llm: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    code = (
        "import asyncio\n"
        "from openagent import OrchestratorActionAgent, ToolSchema, run_action_agent\n"
        "import os, pathlib\n"
        "async def handler(tool_name, arguments):\n"
        "    pathlib.Path(os.environ['CALL_MARKER']).write_text('in the handler')\n"
        "    await asyncio.sleep(600)\n"
        f"run_action_agent(OrchestratorActionAgent('sleepy-agent', [ToolSchema(**{WEATHER_TOOL!r})], handler))\n"
    )
    marker = tmp_path / "call-started"
    process = spawn_python(code, {"MASTER_WS": master.ws_url, "CALL_MARKER": str(marker)})
    try:
        await wait_for_agent(master, "sleepy-agent")
        llm.add_tool_call("sleepy-agent__get_weather", {"city": "Paris"})
        llm.add_text("The weather agent stopped while working.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=120) as http:
            pending = asyncio.create_task(http.post("/query", json={"query": "Weather?"}))
            async with asyncio.timeout(90):  # the call is in the agent's handler
                while not marker.exists():
                    await asyncio.sleep(0.05)
            process.send_signal(signal.SIGKILL)
            response = await pending
        assert response.status_code == 200
        # Ended by the disconnect handler (TOOL_CALL_TIMEOUT is 120 s here), not by the timeout.
        error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
        assert error == "agent 'sleepy-agent' disconnected while running tool 'get_weather'"
    finally:
        process.kill()
        process.wait(timeout=10)


async def test_sdk_agent_reconnects_after_master_restart(scripted_llm: ScriptedOpenAIServer) -> None:
    scripted_llm.reset()
    env = master_env(scripted_llm)
    calls: list[dict[str, Any]] = []

    async def handler(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(arguments)
        return {"temperature_c": 10}

    async with MasterProcess(env) as first:
        agent = OrchestratorActionAgent(
            "phoenix-agent", [ToolSchema(**WEATHER_TOOL)], handler, config=config_for(first)
        )
        await agent.start()
        try:
            await wait_for_agent(first, "phoenix-agent")
            port = first.port
            await asyncio.to_thread(first.stop)
            async with MasterProcess(env, port=port) as second:
                await wait_for_agent(second, "phoenix-agent")
                scripted_llm.add_tool_call("phoenix-agent__get_weather", {"city": "Rome"})
                scripted_llm.add_text("10 °C in Rome.")
                async with QueryClient("phoenix-asker", config=config_for(second)) as client:
                    result = await client.query("Weather in Rome?", timeout=90)
                assert result.success and result.answer == "10 °C in Rome."
                assert [u.agent_id for u in result.agents_used] == ["phoenix-agent"]
                assert calls == [{"city": "Rome"}]
        finally:
            await agent.stop()
    scripted_llm.reset()


async def test_query_client_and_handler_errors(master: MasterProcess, llm: ScriptedOpenAIServer) -> None:
    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> Any:
        await progress_callback("starting", 0.1)
        if arguments["city"] == "Nowhere":
            raise RuntimeError("no such place")
        return {"ok": arguments["city"]}

    agent = OrchestratorActionAgent(
        "flaky-agent", [ToolSchema(**WEATHER_TOOL)], handler, config=config_for(master)
    )
    async with agent, QueryClient("flaky-asker", config=config_for(master)) as client:
        llm.add_tool_call("flaky-agent__get_weather", {"city": "Nowhere"})
        llm.add_text("It failed.")
        failed = await client.query("Weather in Nowhere?", allowed_agent_ids=["flaky-agent"], timeout=15)
        assert failed.success
        error = json.loads(llm.requests[1]["messages"][-1]["content"])["error"]
        assert error == "tool 'get_weather' on agent 'flaky-agent' failed: RuntimeError: no such place"

        llm.add_tool_call("flaky-agent__get_weather", {"city": "Lyon"})
        llm.add_text("Lyon is fine.")
        again = await client.query("Weather in Lyon?", session_id=failed.session_id, timeout=15)
        assert again.success and again.session_id == failed.session_id
        assert json.loads(llm.requests[3]["messages"][-1]["content"]) == {"result": {"ok": "Lyon"}}

        rejected = await client.query("x", orchestrator_model="nope", timeout=15)
        assert not rejected.success and "allowed models" in (rejected.error or "")


async def test_demo_invocation_agent_long_task_progress(
    master: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    port = free_port()
    code = "import runpy; runpy.run_path('sample_agents/demo_invocation_agent.py', run_name='__main__')"
    process = spawn_python(
        code,
        {"MASTER_BASE_URL": master.base_url, "INVOCATION_PORT": str(port), "INVOCATION_HOST": "127.0.0.1"},
    )
    try:
        await wait_for_agent(master, "demo-invocation-agent")
        llm.add_tool_call("demo-invocation-agent__long_task", {"steps": 4, "step_seconds": 0.3})
        llm.add_text("The long task finished.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=90) as http:
            streamed = await http.post("/query", json={"query": "run the long task", "stream": True})
        events = [block.split("\n", 1) for block in streamed.text.strip().split("\n\n")]
        seen = [
            json.loads(data.removeprefix("data: ")) for head, data in events if head == "event: tool_progress"
        ]
        [result] = [
            json.loads(data.removeprefix("data: ")) for head, data in events if head == "event: query_result"
        ]
        assert result["success"] and result["agents_used"] == [
            {"agent_id": "demo-invocation-agent", "tool_name": "long_task"}
        ]
        # The agent's progress came over HTTP to the master and on to the asker.
        assert seen and all(0 < event["progress"] <= 1 for event in seen if event.get("progress") is not None)
        assert any(event.get("progress") is not None for event in seen), seen
        assert json.loads(llm.requests[1]["messages"][-1]["content"])["result"]["status"] == "done"
    finally:
        process.kill()
        process.wait(timeout=10)
        async with httpx.AsyncClient(timeout=30) as http:
            await http.post(f"{master.base_url}/unregister", json={"agent_id": "demo-invocation-agent"})


async def test_query_triggers_a_negotiation_between_sample_agents(
    master: MasterProcess, llm: ScriptedOpenAIServer, redis_client: Any
) -> None:
    from sample_agents import negotiation_buyer, negotiation_seller

    buyer = negotiation_buyer.make_agent(config_for(master))
    seller = negotiation_seller.make_agent(config_for(master))
    async with buyer, seller:
        llm.add_tool_call(
            "start_collaboration",
            {"agents": ["buyer-agent", "seller-agent"], "task": "Agree on a price for 100 units"},
        )
        llm.add_text("The buyer and seller agreed on a price.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
            body = (
                await http.post(
                    "/query",
                    json={
                        "query": "Have the buyer and seller agree on a price for 100 units",
                        "allowed_agent_ids": ["buyer-agent", "seller-agent"],
                    },
                )
            ).json()
            assert body["success"], body
            offered = [t["function"]["name"] for t in llm.requests[0]["tools"]]
            assert "start_collaboration" in offered
            outcome = json.loads(llm.requests[1]["messages"][-1]["content"])["result"]
            assert outcome["completed"] and outcome["agents"] == ["buyer-agent", "seller-agent"]
            assert outcome["message_count"] > 1 and "75" in outcome["summary"]
            assert {"agent_id": "buyer-agent", "tool_name": "start_collaboration"} in body["agents_used"]

            collab = json.loads(await redis_client.get(f"collab:{outcome['collab_session_id']}"))
            kinds = [entry["type"] for entry in collab["entries"]]
            assert kinds[0] == "handshake" and kinds[-1] == "end" and "message" in kinds
            parents = await redis_client.smembers(f"collab:by_parent:{body['session_id']}")
            assert outcome["collab_session_id"] in parents

            llm.add_text("It was 75 per unit.")
            await http.post(
                "/query", json={"query": "What price was agreed?", "session_id": body["session_id"]}
            )
            replay = llm.requests[-1]["messages"]
            assert any("collaboration of buyer-agent, seller-agent" in str(m.get("content")) for m in replay)


async def test_collaboration_tool_not_offered_with_fewer_than_two_capable_agents(
    master: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    from sample_agents import negotiation_buyer

    async with negotiation_buyer.make_agent(config_for(master)):
        llm.add_text("ok")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            await http.post("/query", json={"query": "negotiate", "allowed_agent_ids": ["buyer-agent"]})
    offered = [t["function"]["name"] for t in llm.requests[0].get("tools", [])]
    assert "start_collaboration" not in offered
