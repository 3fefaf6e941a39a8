"""``GET /metrics``: the series after real queries, behind the API key; Redis errors counted."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
import redis.asyncio as aioredis
from prometheus_client.parser import text_string_to_metric_families
from redis.exceptions import ConnectionError as RedisConnectionError

from master.observability.metrics import Metrics, count_redis_errors
from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import WEATHER_TOOL, MasterProcess, RawPeer

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def grown(before: Samples, after: Samples) -> Samples:
    """How much each series grew (the shared master has served other tests before)."""
    return {key: number - before.get(key, 0.0) for key, number in after.items()}


async def test_series_after_a_tool_query_and_a_failed_one(
    master: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    peer = await RawPeer.connect(master.ws_url)
    async with httpx.AsyncClient(base_url=master.base_url, timeout=15) as http:
        try:
            before = samples((await http.get("/metrics")).text)
            await peer.register("metrics-weather", tools=[WEATHER_TOOL])
            llm.add_tool_call("metrics-weather__get_weather", {"city": "Oslo"})
            llm.add_text("Cold.")
            pending = asyncio.create_task(http.post("/query", json={"query": "Weather in Oslo?"}))
            call = await peer.recv()
            during = samples((await http.get("/metrics")).text)
            assert value(during, "openagent_tool_calls_in_flight") == 1
            await peer.send(
                {"type": "tool_result", "call_id": call["call_id"], "success": False, "error": "x"}
            )
            assert (await pending).json()["success"] is True

            llm.add_error(500, "provider down")
            failed = await http.post("/query", json={"query": "again?"})
            assert failed.json()["error_code"] == "llm_error"

            response = await http.get("/metrics")
        finally:
            await peer.close()
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    found = grown(before, samples(response.text))
    assert value(found, "openagent_queries_total", outcome="completed") == 1
    assert value(found, "openagent_queries_total", outcome="llm_error") == 1
    assert value(found, "openagent_query_duration_seconds_count", outcome="completed") == 1
    labels = {"agent_id": "metrics-weather", "tool": "get_weather", "outcome": "failed"}
    assert value(found, "openagent_tool_calls_total", **labels) == 1
    assert value(found, "openagent_tool_call_duration_seconds_count", **labels) == 1
    assert value(found, "openagent_llm_calls_total", model="gpt-4o-mini", outcome="success") == 2
    assert value(found, "openagent_llm_calls_total", model="gpt-4o-mini", outcome="llm_error") == 1
    assert (value(found, "openagent_llm_tokens_total", model="gpt-4o-mini") or 0) > 0
    assert value(found, "openagent_llm_call_duration_seconds_count", model="gpt-4o-mini") == 3
    now = samples(response.text)
    assert value(now, "openagent_tool_calls_in_flight") == 0
    assert (value(now, "openagent_connected_agents", transport="websocket") or 0) >= 1
    assert value(now, "openagent_connected_agents", transport="http") is not None
    assert value(now, "openagent_collaboration_sessions_active") == 0


def test_metrics_need_the_api_key(scripted_llm: ScriptedOpenAIServer) -> None:
    with MasterProcess(master_env(scripted_llm, OPENAGENT_API_KEY="metrics-key")) as m:
        assert httpx.get(f"{m.base_url}/metrics", timeout=5).status_code == 401
        response = httpx.get(
            f"{m.base_url}/metrics", headers={"Authorization": "Bearer metrics-key"}, timeout=5
        )
        assert response.status_code == 200 and "openagent_queries_total" in response.text


async def test_redis_errors_are_counted_by_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    metrics = Metrics()
    client = aioredis.Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=1)
    count_redis_errors(client, metrics.redis_errors)
    try:
        for _ in range(2):
            with pytest.raises(RedisConnectionError):
                await client.ping()
    finally:
        await client.aclose()
    found = samples(metrics.render().decode())
    assert value(found, "openagent_redis_errors_total", error="ConnectionError") == 2
