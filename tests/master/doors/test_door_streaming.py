"""Every door streams the answer's tokens as the model writes them.

The scripted server (imitating llama.cpp) holds the answer's second word until the test has seen
the first one arrive through the door, so each test passes only if the door hands a token on
before the model has written the next (the native SSE and the OpenAI door's stream:
``tests/master/orchestration/test_local_models.py``). Each door is driven by its official client:
``mcp`` (``ask``'s progress notifications, one per token), ``a2a-sdk`` (``message/stream``: chunks
of the ``answer`` artifact), and ``ag-ui-protocol``'s event models (``TEXT_MESSAGE_CONTENT``).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import httpx2
import pytest
from a2a.client import ClientConfig as A2AClientConfig
from a2a.client import ClientFactory
from a2a.helpers import new_text_part
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)
from ag_ui.core import Event
from google.protobuf import json_format
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import TypeAdapter

from openagent.testing import TextReply
from tests.master.orchestration.test_local_models import (  # noqa: F401 (fixtures)
    KEY,
    Hub,
    held_reply,
    hub,
    local_llm,
)

DEADLINE = 60.0
EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_mcp_ask_streams_tokens_as_progress_notifications(hub: Hub, mode: str) -> None:  # noqa: F811 (the fixture)
    reply, seen_first, held = held_reply("Hello from a slow model.")
    hub.llm.add(reply)
    messages: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        if message is not None:
            messages.append(message)
            if message.startswith("Hello"):
                seen_first.set()  # the second word is sent only now

    headers = {"Authorization": f"Bearer {KEY}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=DEADLINE) as http,
        Client(streamable_http_client(f"{hub.master.base_url}/mcp", http_client=http), mode=mode) as client,
    ):
        result = await client.call_tool("ask", {"query": "hi"}, progress_callback=on_progress)
    assert not result.is_error, result
    assert held == [True], messages
    assert "Hello from a slow model." in "".join(messages)  # the tokens, among any steps


async def test_the_a2a_stream_sends_answer_chunks_as_the_model_writes_them(hub: Hub) -> None:  # noqa: F811 (the fixture)
    reply, seen_first, held = held_reply("Hello from a slow model.")
    hub.llm.add(reply)
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
    config = A2AClientConfig(httpx_client=http, streaming=True)
    client = await ClientFactory(config).create_from_url(f"{hub.master.base_url}/a2a")
    chunks: list[str] = []
    artifact_ids: set[str] = set()
    final = None
    try:
        message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[new_text_part("hi")])
        request = SendMessageRequest(message=message, configuration=SendMessageConfiguration())
        async with asyncio.timeout(DEADLINE):
            async for response in client.send_message(request):
                if response.HasField("artifact_update"):
                    update = response.artifact_update
                    artifact_ids.add(update.artifact.artifact_id)
                    text = "".join(part.text for part in update.artifact.parts)
                    if update.last_chunk:
                        final = text
                    else:
                        chunks.append(text)
                        seen_first.set()  # the second word is sent only now
                elif response.HasField("status_update"):
                    state = response.status_update.status.state
    finally:
        await client.close()
        await http.aclose()
    assert held == [True]
    assert "".join(chunks) == "Hello from a slow model." and final == "Hello from a slow model."
    assert len(artifact_ids) == 1  # the answer replaces its chunks
    assert state == TaskState.TASK_STATE_COMPLETED


async def test_the_ag_ui_run_sends_text_message_content_as_the_model_writes_it(hub: Hub) -> None:  # noqa: F811 (the fixture)
    reply, seen_first, held = held_reply("Hello from a slow model.")
    hub.llm.add(reply)
    body = {
        "threadId": f"thread-{uuid.uuid4().hex}",
        "runId": uuid.uuid4().hex,
        "messages": [{"id": "m1", "role": "user", "content": "hi"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    events: list[Any] = []
    async with hub.http.stream("POST", "/ag-ui", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                event = EVENTS.validate_json(line[6:])
                events.append(event)
                if event.type.value == "TEXT_MESSAGE_CONTENT":
                    seen_first.set()  # the second word is sent only now
    assert held == [True]
    text = "".join(e.delta for e in events if e.type.value == "TEXT_MESSAGE_CONTENT")
    assert text == "Hello from a slow model." and events[-1].type.value == "RUN_FINISHED"


async def test_an_a2a_task_that_fails_after_streaming_keeps_the_streamed_text_marked_partial(
    hub: Hub,  # noqa: F811 (the fixture)
) -> None:
    def broken(word: int) -> None:
        if word == 1:
            raise ConnectionAbortedError("the model server died mid-answer")

    hub.llm.add(TextReply("Hello from a dying model.", before_token=broken))
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=DEADLINE)
    client = await ClientFactory(A2AClientConfig(httpx_client=http, streaming=True)).create_from_url(
        f"{hub.master.base_url}/a2a"
    )
    try:
        message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[new_text_part("hi")])
        request = SendMessageRequest(message=message, configuration=SendMessageConfiguration())
        async with asyncio.timeout(DEADLINE):
            responses = [response async for response in client.send_message(request)]
        task_id = next(r.task.id for r in responses if r.HasField("task"))
        task = await client.get_task(GetTaskRequest(id=task_id))
    finally:
        await client.close()
        await http.aclose()
    assert task.status.state == TaskState.TASK_STATE_FAILED
    [artifact] = task.artifacts
    assert [part.text for part in artifact.parts] == ["Hello "]
    assert json_format.MessageToDict(artifact.metadata) == {"partial": True}
