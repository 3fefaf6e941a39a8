"""JSON nested deeper than 200 levels is a 400 on every door, never a 500 or a JSON-RPC internal
error (``master.storage.json_bytes.too_deep``, answered by ``master.asgi.JsonDepthGuard``): through the
official ``openai`` client, raw JSON-RPC on ``/mcp`` and ``/a2a`` (the ``mcp`` and ``a2a-sdk``
clients refuse to send such a value themselves: pydantic's serialization depth, protobuf's 100
levels), HTTP and a WebSocket frame."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from tests.factories import InProcessMaster, RawPeer, in_process_master

DEADLINE = 60
TOO_DEEP = "nested deeper than 200 levels"


def nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


@pytest.fixture
async def master() -> AsyncIterator[InProcessMaster]:
    async with in_process_master() as running:
        yield running


async def test_the_openai_door_answers_400_through_the_official_client(master: InProcessMaster) -> None:
    client = openai.AsyncOpenAI(base_url=f"{master.base_url}/v1", api_key="unused", max_retries=0)
    async with client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="openagent",
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"metadata": {"deep": nested(300)}},
            )
    assert refused.value.status_code == 400 and TOO_DEEP in str(refused.value)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/query", {"query": nested(300)}),
        (
            "/register",
            {"agent_id": "deep", "invocation_base_url": "http://127.0.0.1:9", "tools": nested(300)},
        ),
        ("/v1/chat/completions", {"model": "openagent", "messages": nested(300)}),
        ("/a2a", {"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": nested(300)}),
        ("/mcp", {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": nested(300)}}),
    ],
    ids=["query", "register", "openai", "a2a", "mcp"],
)
async def test_every_http_door_answers_400(master: InProcessMaster, path: str, body: dict[str, Any]) -> None:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=DEADLINE) as http:
        response = await http.post(
            path,
            content=json.dumps(body),
            headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
        )
        assert response.status_code == 400, response.text
        assert TOO_DEEP in response.text
        if path in ("/a2a", "/mcp"):
            assert response.json()["error"]["code"] == -32700  # a parse error, never -32603
        # 200 levels are still read as usual (here: refused for what they say, not for their depth)
        shallow = await http.post(
            path, json={"query": nested(150)} if path == "/query" else {"x": nested(150)}
        )
        assert TOO_DEEP not in shallow.text and shallow.status_code < 500, shallow.text


async def test_a_websocket_frame_is_refused_and_the_connection_stays_usable(master: InProcessMaster) -> None:
    peer = await RawPeer.connect(master.ws_url)
    try:
        await peer.send(json.dumps({"type": "register", "agent_id": "deep", "metadata": nested(300)}))
        refused = await peer.recv()
        assert (refused["type"], refused["code"]) == ("error", "invalid_message")
        assert TOO_DEEP in refused["message"]
        await peer.register("after-deep")
    finally:
        await peer.close()
