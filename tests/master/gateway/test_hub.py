"""The WebSocket contract, spoken by a raw ``websockets`` client that knows only the wire format."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx

from openagent.testing import ScriptedOpenAIServer
from tests.factories import WEATHER_TOOL, MasterProcess, RawPeer, agent_rows, in_process_master


async def test_register_and_ping(master: MasterProcess) -> None:
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("raw-ping-agent", tools=[WEATHER_TOOL])
        await peer.send({"type": "ping"})
        assert await peer.recv() == {"type": "pong"}
        agents = await agent_rows(master.base_url)
        row = next(a for a in agents if a["agent_id"] == "raw-ping-agent")
        assert row["connection_type"] == "websocket"
        assert row["tools"][0]["name"] == "get_weather"
    finally:
        await peer.close()


async def test_bad_frames_get_errors_and_connection_stays_usable(master: MasterProcess) -> None:
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.send({"type": "tool_result", "call_id": "x", "success": True})
        reply = await peer.recv()
        assert reply["type"] == "error" and reply["code"] == "not_registered"

        await peer.send("{not json")
        reply = await peer.recv()
        assert reply["code"] == "invalid_message" and "JSON" in reply["message"]

        await peer.send({"type": "teleport"})
        reply = await peer.recv()
        assert reply["code"] == "unknown_type" and "teleport" in reply["message"]

        await peer.send({"no_type": 1})
        assert (await peer.recv())["code"] == "invalid_message"

        await peer.send({"type": "register", "agent_id": "bad id!", "role": "action"})
        reply = await peer.recv()
        assert reply["code"] == "invalid_message" and "agent_id" in reply["message"]

        await peer.register("raw-bad-frames")
        await peer.send({"type": "tool_result", "call_id": "nope", "success": True, "result": 1})
        reply = await peer.recv()
        assert reply == {
            "type": "error",
            "code": "unknown_call",
            "message": "no call 'nope' is waiting for agent 'raw-bad-frames'",
            "ref": "nope",
        }
        await peer.send({"type": "ping"})
        assert await peer.recv() == {"type": "pong"}
    finally:
        await peer.close()


async def test_oversized_frame_is_refused(llm: ScriptedOpenAIServer) -> None:
    async with in_process_master(openai_base_url=llm.base_url, openagent_ws_max_message_bytes=1000) as m:
        peer = await RawPeer.connect(m.ws_url)
        try:
            await peer.register("raw-big")
            await peer.send({"type": "ping", "padding": "x" * 2000})
            reply = await peer.recv()
            assert reply["code"] == "message_too_large" and "1000" in reply["message"]
            await peer.send({"type": "ping"})
            assert await peer.recv() == {"type": "pong"}
        finally:
            await peer.close()


async def test_oversized_frame_is_refused_before_the_server_buffers_it(
    scripted_llm: ScriptedOpenAIServer,
) -> None:
    """Defect 10: the WebSocket server's own limit is OPENAGENT_WS_MAX_MESSAGE_BYTES, so a larger
    frame closes the connection with 1009 (message too big) instead of being read in full; HTTP
    bodies over OPENAGENT_HTTP_MAX_BODY_BYTES get 413, with or without a Content-Length."""
    env = {
        "OPENAI_BASE_URL": scripted_llm.base_url,
        "OPENAGENT_WS_MAX_MESSAGE_BYTES": "1000",
        "OPENAGENT_HTTP_MAX_BODY_BYTES": "2000",
    }
    with MasterProcess(env) as m:
        peer = await RawPeer.connect(m.ws_url, max_size=None)
        try:
            await peer.register("raw-big")
            await peer.send({"type": "ping", "padding": "x" * 900})
            assert await peer.recv() == {"type": "pong"}
            await peer.send({"type": "ping", "padding": "x" * 5000})
            async with asyncio.timeout(60):
                await peer.ws.wait_closed()
            assert peer.ws.close_code == 1009
        finally:
            await peer.close()

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b"x" * 1000

        async with httpx.AsyncClient(base_url=m.base_url, timeout=10) as http:
            assert (await http.post("/query", content=b"x" * 5000)).status_code == 413
            assert (await http.post("/query", content=chunks())).status_code == 413
            assert (await http.post("/query", json={"query": "small"})).status_code != 413


async def test_newest_connection_wins(master: MasterProcess) -> None:
    old = await RawPeer.connect(master.ws_url)
    new = await RawPeer.connect(master.ws_url)
    try:
        await old.register("raw-dup")
        await new.register("raw-dup")
        reply = await old.recv()
        assert reply["code"] == "agent_replaced"
        async with asyncio.timeout(60):
            await old.ws.wait_closed()
        assert old.ws.close_code == 4001
        await new.send({"type": "ping"})
        assert await new.recv() == {"type": "pong"}
        agents = await agent_rows(master.base_url)
        assert [a["agent_id"] for a in agents].count("raw-dup") == 1
    finally:
        await old.close()
        await new.close()


async def test_a_call_in_flight_fails_at_once_when_its_agent_re_registers(
    master: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    """The call on the old connection fails as "replaced", not later as "disconnected" when the
    old socket has closed (nor after its timeout)."""
    old = await RawPeer.connect(master.ws_url)
    new = await RawPeer.connect(master.ws_url)
    try:
        await old.register("raw-replaced", tools=[WEATHER_TOOL])
        llm.add_tool_call("raw-replaced__get_weather", {"city": "Oslo"})
        llm.add_text("The agent went away.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=30) as http:
            pending = asyncio.create_task(
                http.post("/query", json={"query": "Weather?", "allowed_agent_ids": ["raw-replaced"]})
            )
            call = await old.recv()
            assert call["type"] == "tool_call"
            await new.register("raw-replaced", tools=[WEATHER_TOOL])
            response = await pending
        assert response.status_code == 200, response.text
        tool_message = llm.requests[1]["messages"][-1]
        assert tool_message["role"] == "tool"
        assert "was replaced by a newer connection" in tool_message["content"], tool_message["content"]
    finally:
        await old.close()
        await new.close()


async def test_raw_action_agent_serves_a_query(master: MasterProcess, llm: ScriptedOpenAIServer) -> None:
    """An agent written against the wire contract alone answers a tool call."""
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("raw-weather", tools=[WEATHER_TOOL])
        llm.add_tool_call("raw-weather__get_weather", {"city": "Oslo"})
        llm.add_text("It is 3 °C in Oslo.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=10) as http:
            pending = asyncio.create_task(
                http.post("/query", json={"query": "Weather in Oslo?", "allowed_agent_ids": ["raw-weather"]})
            )
            call = await peer.recv()
            assert call["type"] == "tool_call" and call["tool_name"] == "get_weather"
            assert call["arguments"] == {"city": "Oslo"}
            await peer.send(
                {"type": "tool_progress", "call_id": call["call_id"], "message": "looking", "progress": 0.5}
            )
            await peer.send(
                {"type": "tool_result", "call_id": call["call_id"], "success": True, "result": {"c": 3}}
            )
            response = await pending
        body = response.json()
        assert response.status_code == 200, body
        assert body["answer"] == "It is 3 °C in Oslo."
        assert body["agents_used"] == [{"agent_id": "raw-weather", "tool_name": "get_weather"}]
        tool_message = llm.requests[1]["messages"][-1]
        assert tool_message["role"] == "tool" and json.loads(tool_message["content"]) == {"result": {"c": 3}}
    finally:
        await peer.close()


async def test_deeply_nested_frames_get_an_error_and_the_connection_keeps_its_calls(
    master: MasterProcess, llm: ScriptedOpenAIServer
) -> None:
    """Defect 7: ``'[' * 1000 + ']' * 1000``, alone or as a ``tool_result``'s result, is an
    ``invalid_message`` error; the sender stays registered and its call in flight completes."""
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("raw-deep", tools=[WEATHER_TOOL])
        llm.add_tool_call("raw-deep__get_weather", {"city": "Oslo"})
        llm.add_text("Fine.")
        async with httpx.AsyncClient(base_url=master.base_url, timeout=15) as http:
            pending = asyncio.create_task(
                http.post("/query", json={"query": "Weather?", "allowed_agent_ids": ["raw-deep"]})
            )
            call = await peer.recv()
            deep = "[" * 1000 + "]" * 1000
            await peer.send(deep)
            reply = await peer.recv()
            assert (reply["code"], reply["message"]) == (
                "invalid_message",
                "frame is nested deeper than 200 levels",
            )
            await peer.send(
                f'{{"type": "tool_result", "call_id": "{call["call_id"]}", "success": true, "result": {deep}}}'
            )
            assert (await peer.recv())["code"] == "invalid_message"
            await peer.send({"type": "ping"})
            assert await peer.recv() == {"type": "pong"}
            await peer.send({"type": "tool_result", "call_id": call["call_id"], "success": True, "result": 1})
            response = await pending
        assert response.status_code == 200 and response.json()["agents_used"] != []
    finally:
        await peer.close()


async def test_legacy_invocation_register_cannot_take_a_live_agents_id(master: MasterProcess) -> None:
    """Defect 12: a ``register`` with ``invocation_url`` for the id of a live WebSocket agent is
    refused, as ``POST /register`` refuses it (409), and the live agent keeps its connection."""
    live = await RawPeer.connect(master.ws_url)
    other = await RawPeer.connect(master.ws_url)
    try:
        await live.register("raw-live-id", tools=[WEATHER_TOOL])
        await other.send(
            {
                "type": "register",
                "agent_id": "raw-live-id",
                "role": "action",
                "tools": [WEATHER_TOOL],
                "invocation_url": "http://127.0.0.1:9",
            }
        )
        reply = await other.recv()
        assert (reply["code"], reply["ref"]) == ("agent_conflict", "raw-live-id")
        assert "connected over WebSocket" in reply["message"]
        await live.send({"type": "ping"})
        assert await live.recv() == {"type": "pong"}
        rows = [r for r in await agent_rows(master.base_url) if r["agent_id"] == "raw-live-id"]
        assert [r["connection_type"] for r in rows] == ["websocket"]
    finally:
        await live.close()
        await other.close()
