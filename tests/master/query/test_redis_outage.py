"""A query when Redis stops or hangs: 503 ``session_store_unavailable`` before any LLM or tool call
(and a WebSocket registration then: an ``error`` ``session_store_unavailable``).

These tests run their own ``redis-server`` on a free port, so they can stop it (shutdown) or
freeze it (SIGSTOP) without touching the tests' shared Redis.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from master.auth import Role
from master.llm.model import ChatResult, FunctionChatModel, ToolCallRequest
from tests.factories import RawPeer, free_port, in_process_master
from tests.master.orchestration.test_orchestrator import counter_agent

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")


@pytest.fixture
async def own_redis() -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    """A redis-server of this test's own: its URL and process (continued and stopped at the end)."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        *("redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = aioredis.Redis.from_url(url)
        try:
            async with asyncio.timeout(30):
                while True:
                    try:
                        if await client.ping():
                            break
                    except aioredis.ConnectionError:
                        await asyncio.sleep(0.05)
        finally:
            await client.aclose()
        yield url, process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGCONT)
            process.terminate()
            try:
                async with asyncio.timeout(30):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()


class _Model:
    """Calls the counter agent's tool once, then answers; records every request."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None
    ) -> ChatResult:
        self.requests += 1
        if messages[-1].get("role") == "user":
            return ChatResult(None, [ToolCallRequest(f"c{self.requests}", "outage-agent__step", '{"n": 1}')])
        return ChatResult("Counted.")


async def _refused_before_side_effects(
    http: httpx.AsyncClient, model: _Model, calls: list[int], **request: Any
) -> dict[str, Any]:
    response = await http.post("/query", json={"query": "count to one", **request})
    body: dict[str, Any] = response.json()
    assert response.status_code == 503, body
    assert body["error_code"] == "session_store_unavailable", body
    assert "session store unavailable" in body["error"], body
    assert model.requests == 0 and calls == [], "the LLM or the tool ran although Redis was down"
    return body


async def test_redis_stopped_just_after_answering_refuses_a_new_session_before_the_llm(
    own_redis: tuple[str, asyncio.subprocess.Process], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20: a recent Redis answer let a query in a new session skip its check, run its tool
    and then answer "answered, but not stored". However recent the last answer (the window is
    made an hour here, so the old shortcut is certain to be taken), a stopped Redis is noticed
    before the LLM is asked."""
    url, process = own_redis
    monkeypatch.setattr("master.query.setup.CHECK_FRESH_SECONDS", 3600.0)
    model = _Model()
    calls: list[int] = []
    async with (
        in_process_master(FunctionChatModel(model), redis_url=url) as m,
        counter_agent(m, "outage-agent", calls),
        httpx.AsyncClient(base_url=m.base_url, timeout=60) as http,
    ):
        first = (await http.post("/query", json={"query": "count to one"})).json()
        assert first["success"] and calls == [1], first  # Redis answered just now
        model.requests, calls[:] = 0, []
        process.terminate()  # Redis stops (SIGTERM: it closes its connections and exits)
        async with asyncio.timeout(30):
            await process.wait()
        await _refused_before_side_effects(http, model, calls)


async def test_a_hung_redis_answers_503_within_the_query_deadline(
    own_redis: tuple[str, asyncio.subprocess.Process], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20: with Redis frozen (SIGSTOP: it accepts connections but never answers), a query
    waited out the socket timeout twice (the command, then its retry) and answered with the
    client's own timeout message. The whole Redis step now has one deadline,
    ``REDIS_QUERY_TIMEOUT_SECONDS``, which the 503 names; neither the LLM nor the tool runs."""
    url, process = own_redis
    monkeypatch.setattr("master.query.setup.CHECK_FRESH_SECONDS", 0.0)  # a new session pings
    model = _Model()
    calls: list[int] = []
    async with (
        in_process_master(FunctionChatModel(model), redis_url=url, redis_query_timeout_seconds=1.0) as m,
        counter_agent(m, "outage-agent", calls),
        httpx.AsyncClient(base_url=m.base_url, timeout=120) as http,
    ):
        first = (await http.post("/query", json={"query": "count to one"})).json()
        assert first["success"] and calls == [1], first
        model.requests, calls[:] = 0, []
        process.send_signal(signal.SIGSTOP)
        try:
            for session in ({}, {"session_id": first["session_id"]}):  # check, then load
                body = await _refused_before_side_effects(http, model, calls, **session)
                assert "no answer within 1 s (REDIS_QUERY_TIMEOUT_SECONDS)" in body["error"], body
        finally:
            process.send_signal(signal.SIGCONT)
        # Redis woke: the connections the deadline cut are not reused, the session goes on.
        again = (await http.post("/query", json={"query": "again", "session_id": first["session_id"]})).json()
        assert again["success"] and calls == [1], again


async def test_a_legacy_invocation_register_with_redis_down_is_session_store_unavailable(
    own_redis: tuple[str, asyncio.subprocess.Process],
) -> None:
    """A ``register`` frame carrying an ``invocation_url`` whose id cannot be claimed because
    Redis stopped is answered ``session_store_unavailable``, as the plain ``register`` is, not
    ``invalid_message`` (the agent did nothing wrong)."""
    url, process = own_redis
    async with in_process_master(
        FunctionChatModel(_Model()), redis_url=url, openagent_api_key="outage-admin"
    ) as m:
        assert m.services.keys is not None
        _, secret = await m.services.keys.create(name="agent", role=Role.AGENT, tenant="a", agent_ids=["*"])
        peer = await RawPeer.connect(m.ws_url, additional_headers={"Authorization": f"Bearer {secret}"})
        try:
            process.terminate()
            async with asyncio.timeout(30):
                await process.wait()
            await peer.send(
                {
                    "type": "register",
                    "agent_id": "legacy-http",
                    "role": "action",
                    "tools": [{"name": "t", "description": "A tool", "parameters": {"type": "object"}}],
                    "invocation_url": "http://127.0.0.1:9",
                }
            )
            refused = await peer.recv()
            assert (refused["type"], refused["code"], refused["ref"]) == (
                "error",
                "session_store_unavailable",
                "legacy-http",
            ), refused
        finally:
            await peer.close()
