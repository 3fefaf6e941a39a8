"""Every door onto the query entry gives the same outcome for the same case.

The doors are listed in ``DOORS``: ``POST /query`` as JSON, as Server-Sent Events, the
WebSocket ``query`` frame, the OpenAI-compatible ``POST /v1/chat/completions`` and the ``ask``
tool of the MCP server (``/mcp``). A new door (A2A...) is one more :class:`Door` here, and then
meets every case. A door whose protocol names a case its own way says so in ``renamed`` (the
OpenAI API: an unknown agent is an unknown model, ``openagent/<agent_id>``). Each case runs on its own in-process master
(real lifespan, Redis, uvicorn on loopback, a function for the LLM).

A door reports ``(error_code, status)``. The status is the HTTP status where the door has one:
the JSON answer always; the SSE door only for a refusal before the run (``too_many_queries``,
``draining``): once a query is admitted, the stream has begun with 200 and the outcome comes in
its last event. The WebSocket door has no status: a refusal is an ``error`` frame, an outcome a
``query_result``, both carrying the code. Nor has the MCP door: the code is in the ``ask``
result's structured content (``isError`` when there is one).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from mcp import Client

from master.llm.model import ChatMessage, ChatResult, FunctionChatModel, ToolCallRequest
from tests.factories import TEST_REDIS_URL, WEATHER_TOOL, InProcessMaster, RawPeer, in_process_master

Outcome = tuple[str | None, int | None]
"""``(error_code, HTTP status or None)``."""


@dataclass(frozen=True)
class Door:
    name: str
    ask: Callable[[InProcessMaster, dict[str, Any]], Awaitable[Outcome]]
    status_after_admission: bool
    """Whether the door's status still says the outcome once the query was admitted."""
    renamed: dict[str, Outcome] | None = None
    """Case name → the outcome this door gives instead."""


async def _http(master: InProcessMaster, body: dict[str, Any]) -> Outcome:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
        response = await http.post("/query", json=body)
    assert response.headers["content-type"] == "application/json"
    return response.json()["error_code"], response.status_code


async def _sse(master: InProcessMaster, body: dict[str, Any]) -> Outcome:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
        response = await http.post("/query", json={**body, "stream": True})
    if response.headers["content-type"] == "application/json":  # refused before the stream
        return response.json()["error_code"], response.status_code
    assert response.headers["content-type"].startswith("text/event-stream")
    last_event, last_data = response.text.strip().split("\n\n")[-1].split("\n")
    assert last_event == "event: query_result"
    return json.loads(last_data.removeprefix("data: "))["error_code"], response.status_code


async def _websocket(master: InProcessMaster, body: dict[str, Any]) -> Outcome:
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.register("door-asker", role="query")
        await peer.send({"type": "query", "query_id": "door-q", **body})
        reply = await peer.recv(timeout=60)
    finally:
        await peer.close()
    assert reply.get("query_id", reply.get("ref")) == "door-q", reply
    if reply["type"] == "error":
        return reply["code"], None
    assert reply["type"] == "query_result"
    return reply["error_code"], None


async def _mcp(master: InProcessMaster, body: dict[str, Any]) -> Outcome:
    """The ``ask`` tool of ``/mcp`` (the official client, 2026-07-28): the code in its structured content."""
    async with Client(f"{master.base_url}/mcp") as client:
        result = await client.call_tool("ask", body)
    assert result.structured_content is not None, result
    code = result.structured_content["error_code"]
    assert result.is_error is (code is not None), result
    return code, None


async def _openai(master: InProcessMaster, body: dict[str, Any]) -> Outcome:
    allowed = body.get("allowed_agent_ids")
    request = {
        "model": f"openagent/{allowed[0]}" if allowed else "openagent",
        "messages": [{"role": "user", "content": body["query"]}],
    }
    headers = {"X-OpenAgent-Session-Id": body["session_id"]} if "session_id" in body else {}
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
        response = await http.post("/v1/chat/completions", json=request, headers=headers)
    assert response.headers["content-type"] == "application/json"
    answer = response.json()
    if response.status_code == 200:
        assert answer["object"] == "chat.completion"
        return None, 200
    assert set(answer["error"]) == {"message", "type", "param", "code"}, answer
    return answer["error"]["code"], response.status_code


DOORS = [
    Door("http", _http, status_after_admission=True),
    Door("sse", _sse, status_after_admission=False),
    Door("websocket", _websocket, status_after_admission=False),
    Door(
        "openai",
        _openai,
        status_after_admission=True,
        renamed={"unknown agent": ("unknown_model", 404)},
    ),
    Door("mcp", _mcp, status_after_admission=False),
]


def _model(messages: Sequence[ChatMessage], tools: Any) -> ChatResult:
    """Calls the failing agent's tool when it has one, then answers with what the tool said."""
    last = messages[-1]
    if last["role"] == "tool":
        return ChatResult(f"The tool said: {last['content']}")
    if tools:
        return ChatResult(None, [ToolCallRequest("c1", "failing__get_weather", '{"city": "Paris"}')])
    return ChatResult("ok")


@dataclass
class Case:
    name: str
    code: str | None
    status: int
    refused: bool = False
    """Refused before the run (nothing ran)."""
    body: dict[str, Any] | None = None


async def _full(master: InProcessMaster) -> None:
    admission = master.services.entry.admission
    while admission.in_flight < admission.limit:  # the master runs as many queries as it may
        admission.enter()


async def _draining(master: InProcessMaster) -> None:
    master.services.entry.admission.close("the master is stopping; retry on another")


async def _bug(master: InProcessMaster) -> None:
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in the query service")

    master.services.queries.run = broken  # type: ignore[method-assign]


CASES: list[tuple[Case, Callable[[InProcessMaster], Awaitable[None]] | None]] = [
    (Case("answered", None, 200), None),
    (Case("too many queries", "too_many_queries", 429, refused=True), _full),
    (Case("draining", "draining", 503, refused=True), _draining),
    (Case("unknown session", "unknown_session", 404, body={"session_id": "no-such-session"}), None),
    (Case("agent fails mid-call", None, 200, body={"allowed_agent_ids": ["failing"]}), None),
    (Case("internal error", "internal_error", 500), _bug),
    (Case("unknown agent", "unknown_agent", 400, body={"allowed_agent_ids": ["ghost-agent"]}), None),
]


@pytest.fixture
async def master() -> AsyncIterator[InProcessMaster]:
    async with in_process_master(FunctionChatModel(_model), openagent_max_queries_in_flight=2) as m:
        yield m


@pytest.mark.parametrize("door", DOORS, ids=[d.name for d in DOORS])
@pytest.mark.parametrize(("case", "setup"), CASES, ids=[c.name for c, _ in CASES])
async def test_every_door_gives_the_same_outcome(
    master: InProcessMaster,
    door: Door,
    case: Case,
    setup: Callable[[InProcessMaster], Awaitable[None]] | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = None
    if case.name == "agent fails mid-call":
        agent = await RawPeer.connect(master.ws_url)
        await agent.register("failing", tools=[WEATHER_TOOL])
    if setup is not None:
        await setup(master)
    asked = asyncio.create_task(door.ask(master, {"query": "Weather in Paris?", **(case.body or {})}))
    if agent is not None:
        call = await agent.recv()  # the call reached the agent, which now dies without answering
        assert call["type"] == "tool_call" and call["tool_name"] == "get_weather"
        agent.ws.transport.abort()
    try:
        async with asyncio.timeout(60):
            code, status = await asked
    finally:
        asked.cancel()
    expected_status = case.status if door.status_after_admission or case.refused else 200
    expected_code = case.code
    if door.renamed and case.name in door.renamed:
        expected_code, expected_status = door.renamed[case.name]
    assert code == expected_code, door.name
    if status is not None:
        assert status == expected_status, door.name
    if case.name == "internal error":
        assert "a bug in the query service" in caplog.text  # logged once, with its traceback


async def test_unknown_agent_names_the_ids_and_at_most_20_known_ones(master: InProcessMaster) -> None:
    peers = [await RawPeer.connect(master.ws_url) for _ in range(21)]
    try:
        for n, peer in enumerate(peers):
            await peer.register(f"agent-{n:02}", tools=[WEATHER_TOOL])
        async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
            body = {"query": "hi", "allowed_agent_ids": ["agent-00", "ghost-agent", "ghost-agent"]}
            response = await http.post("/query", json=body)
    finally:
        for peer in peers:
            await peer.close()
    assert response.status_code == 400 and response.json()["error_code"] == "unknown_agent"
    message = response.json()["error"]
    assert "unknown agent(s) 'ghost-agent'; known agents: " in message
    # 21 connected here (and maybe invocation agents other tests left in Redis): 20 named, the rest counted
    known = message.split("known agents: ", 1)[1]
    assert len(re.findall(r"'[^']+'", known)) == 20 and re.search(r"' and \d+ more$", known), message


async def stored_mentions(marker: str) -> list[str]:
    """Every key of the tests' Redis whose name or value mentions ``marker`` (any type of value)."""
    redis = aioredis.Redis.from_url(TEST_REDIS_URL)
    found: list[str] = []
    try:
        async for raw in redis.scan_iter(count=1000):
            key = raw.decode(errors="replace")
            kind = (await redis.type(raw)).decode()
            if kind == "string":
                value: Any = await redis.get(raw)
            elif kind == "hash":
                value = await redis.hgetall(raw)
            elif kind == "list":
                value = await redis.lrange(raw, 0, -1)
            elif kind == "set":
                value = await redis.smembers(raw)
            elif kind == "zset":
                value = await redis.zrange(raw, 0, -1)
            elif kind == "stream":
                value = await redis.xrange(raw)
            else:
                value = b""
            if marker in key or marker.encode() in repr(value).encode():
                found.append(key)
    finally:
        await redis.aclose()
    return found


@pytest.mark.parametrize("door", DOORS, ids=[d.name for d in DOORS])
async def test_a_refused_request_leaves_nothing_in_redis_on_every_door(
    master: InProcessMaster, door: Door
) -> None:
    """A request the service refuses (an unknown session) has no run record and no other trace:
    a record written before the refusal would keep what the refusal names."""
    marker = f"secret-session-{door.name}"
    code, _ = await door.ask(master, {"query": "Weather in Paris?", "session_id": marker})
    assert code == "unknown_session"
    assert await stored_mentions(marker) == []


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_an_attachment_refused_for_its_base64_leaves_no_file_name_and_no_run(
    master: InProcessMaster, stream: bool
) -> None:
    name = f"secret-name-{'sse' if stream else 'json'}.pdf"
    attachment = {"filename": name, "mime_type": "application/pdf", "content_base64": "%%% not base64 %%%"}
    body = {"query": "read it", "attachments": [attachment], "stream": stream}
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
        response = await http.post("/query", json=body)
        if stream:  # the stream's header named its run before the refusal: it has no record
            assert response.headers["content-type"].startswith("text/event-stream")
            last = response.text.strip().split("\n\n")[-1].split("\n")[1]
            answer = json.loads(last.removeprefix("data: "))
            run = await http.get(f"/runs/{response.headers['OpenAgent-Run-Id']}")
            assert run.status_code == 404 and run.json()["error_code"] == "unknown_run"
        else:
            assert response.status_code == 400, response.text
            answer = response.json()
    assert answer["error_code"] == "invalid_attachment" and name in answer["error"]
    assert answer["run_id"] is None  # refused before it ran: no run
    assert await stored_mentions(name) == [] and await stored_mentions(answer["query_id"]) == []
