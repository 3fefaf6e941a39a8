"""A client's mistake on the A2A door is one WARNING with the request's id and why, no traceback;
a bug of the master stays an ERROR with its traceback (:mod:`master.doors.a2a.logs`).

Raw JSON-RPC posts (the mistakes a client makes that the official client would not send), on a
real master (lifespan, Redis, uvicorn on loopback) with a WebSocket agent; the 1.0 methods (with
``A2A-Version: 1.0``) and their 0.3 forms (without).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from master.llm.model import ChatResult, FunctionChatModel
from tests.factories import WEATHER_TOOL, InProcessMaster, RawPeer, in_process_master

AGENT = "a2a-logs-agent"
V1 = {"A2A-Version": "1.0"}


def _message(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": parts}


def _rpc(request_id: str, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


MISTAKES: list[tuple[str, bytes | dict[str, Any], dict[str, str], str]] = [
    ("not json", b"{not json", V1, "Expecting property name"),
    ("params that do not parse", _rpc("r-params", "SendMessage", {"message": 5}), V1, "Invalid params"),
    ("unknown task", _rpc("r-task", "GetTask", {"id": "no-such-task"}), V1, "Task not found"),
    (
        "cancel of an unknown task",
        _rpc("r-cancel", "CancelTask", {"id": "no-such-task"}),
        V1,
        "Task not found",
    ),
    (
        "a tool call the executor refuses",
        _rpc("r-call", "SendMessage", {"message": _message([{"data": {"tool": 5}}])}),
        V1,
        "'tool' must be the name of one of the agent's tools",
    ),
    (
        "the same, streamed",
        _rpc("r-stream", "SendStreamingMessage", {"message": _message([{"data": {"tool": 5}}])}),
        V1,
        "'tool' must be the name of one of the agent's tools",
    ),
    (
        "0.3: a tool call the executor refuses",
        _rpc(
            "r-call-03",
            "message/send",
            {
                "message": {
                    "role": "user",
                    "kind": "message",
                    "messageId": uuid.uuid4().hex,
                    "parts": [{"kind": "data", "data": {"tool": 5}}],
                }
            },
        ),
        {},
        "'tool' must be the name of one of the agent's tools",
    ),
    (
        "0.3: a message that is not one",
        _rpc("r-params-03", "message/send", {"message": 5}),
        {},
        "Invalid Request",
    ),
    ("0.3: unknown task", _rpc("r-task-03", "tasks/get", {"id": "no-such-task"}), {}, "Task not found"),
]


@pytest.fixture
async def master() -> AsyncIterator[InProcessMaster]:
    async with in_process_master(FunctionChatModel(lambda messages, tools: ChatResult("ok"))) as m:  # type: ignore[arg-type]
        peer = await RawPeer.connect(m.ws_url)
        await peer.register(AGENT, tools=[WEATHER_TOOL])
        try:
            yield m
        finally:
            await peer.close()


async def _post(master: InProcessMaster, body: bytes | dict[str, Any], headers: dict[str, str]) -> str:
    url = f"{master.base_url}/a2a/agents/{AGENT}"
    async with httpx.AsyncClient(timeout=60) as http:
        if isinstance(body, bytes):
            response = await http.post(
                url, content=body, headers={**headers, "content-type": "application/json"}
            )
        else:
            response = await http.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.text


@pytest.mark.parametrize(("case", "body", "headers", "reason"), MISTAKES, ids=[m[0] for m in MISTAKES])
async def test_a_client_s_mistake_is_one_warning_with_the_request_id_and_no_traceback(
    master: InProcessMaster,
    caplog: pytest.LogCaptureFixture,
    case: str,
    body: bytes | dict[str, Any],
    headers: dict[str, str],
    reason: str,
) -> None:
    caplog.set_level(logging.INFO)
    answer = await _post(master, body, headers)
    assert '"error"' in answer and reason in answer, answer
    records = [r for r in caplog.records if r.name.startswith(("a2a", "master.doors.a2a"))]
    assert [r for r in records if r.levelno >= logging.ERROR or r.exc_info] == [], [
        (r.levelname, r.getMessage()) for r in records
    ]
    warnings = [r for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    request_id = json.dumps(body.get("id") if isinstance(body, dict) else None)
    line = warnings[0].getMessage()
    assert f"A2A request {request_id} " in line and reason in line, line


async def test_a_bug_of_the_master_stays_an_error_with_its_traceback(
    master: InProcessMaster, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in the A2A executor")

    monkeypatch.setattr(master.services.a2a.executor, "execute", broken)
    body = _rpc("r-bug", "SendMessage", {"message": _message([{"text": "hi"}])})
    answer = await _post(master, body, V1)
    assert '"error"' in answer and "-32603" in answer, answer
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.exc_info]
    assert any("a bug in the A2A executor" in str(r.exc_info[1]) for r in errors if r.exc_info), [
        r.getMessage() for r in caplog.records
    ]
    assert not [r for r in caplog.records if r.name == "master.doors.a2a" and r.levelno == logging.WARNING]
