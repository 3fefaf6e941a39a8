"""Log lines: no secrets, no forged lines, no flooding."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from master.observability.redaction import LOG_ARG_MAX_CHARS, SafeLogFilter
from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import MasterProcess, RawPeer, serve_app

KEY = "log-test-api-key-0123456789"


def _formatted(filter_: SafeLogFilter, msg: str, *args: Any) -> str:
    record = logging.LogRecord("test", logging.INFO, __file__, 1, msg, args, None)
    assert filter_.filter(record)
    return record.getMessage()


def test_secrets_are_redacted_and_access_log_args_keep_their_shape() -> None:
    safe = SafeLogFilter([KEY])
    line = _formatted(
        safe,
        '%s - "%s %s HTTP/%s" %d',
        "127.0.0.1:5",
        "POST",
        "/tool_callback?call_id=c1&token=abc",
        "1.1",
        200,
    )
    assert line == '127.0.0.1:5 - "POST /tool_callback?call_id=c1&token=*** HTTP/1.1" 200'
    assert _formatted(safe, "key %s in a message", KEY) == "key *** in a message"
    assert _formatted(safe, "header %s", f"Authorization: Bearer {KEY}") == "header Authorization: Bearer ***"


async def test_neither_the_api_key_nor_a_call_token_reaches_the_log(
    scripted_llm: ScriptedOpenAIServer,
) -> None:
    """Defect 6: a run that used ``/ws?token=<key>`` and an invocation callback (with its per-call
    token) leaves neither secret in the master's log, access log included."""
    scripted_llm.reset()
    calls: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def run(request: Request) -> JSONResponse:
        await calls.put(await request.json())
        return JSONResponse({}, status_code=202)

    agent = Starlette(routes=[Route("/health", health), Route("/run", run, methods=["POST"])])
    auth = {"Authorization": f"Bearer {KEY}"}
    async with (
        MasterProcess(master_env(scripted_llm, OPENAGENT_API_KEY=KEY)) as m,
        serve_app(agent) as agent_url,
        httpx.AsyncClient(base_url=m.base_url, timeout=15) as http,
    ):
        peer = await RawPeer.connect(f"{m.ws_url}?token={KEY}")
        await peer.register("log-ws-agent")
        await peer.close()
        tool = {"name": "echo", "endpoint": "/run"}
        body = {"agent_id": "log-http-agent", "invocation_base_url": agent_url, "tools": [tool]}
        assert (await http.post("/register", json=body, headers=auth)).status_code == 200
        scripted_llm.add_tool_call("log-http-agent__echo", {})
        scripted_llm.add_text("done")
        query = asyncio.create_task(
            http.post("/query", json={"query": "echo", "allowed_agent_ids": ["log-http-agent"]}, headers=auth)
        )
        async with asyncio.timeout(60):
            call = await calls.get()
        token = call["callback_url"].rsplit("token=", 1)[1]
        assert (await http.post(call["progress_url"], json={"call_id": call["call_id"]})).status_code == 200
        result = {"call_id": call["call_id"], "success": True, "result": 1}
        assert (await http.post(call["callback_url"], json=result)).status_code == 200
        assert (await query).status_code == 200
        await http.post("/unregister", json={"agent_id": "log-http-agent"}, headers=auth)
        log = m.log_path.read_text(errors="replace")
    assert "WebSocket /ws?token=***" in log and "/tool_callback?call_id=" in log  # the lines exist
    assert KEY not in log
    assert token not in log
    scripted_llm.reset()


def test_agent_text_cannot_forge_lines_or_flood() -> None:
    safe = SafeLogFilter()
    line = _formatted(safe, "progress %s", "ok\n2024-01-01 CRITICAL forged" + "x" * 1_000_000)
    assert "\n" not in line and "ok\\n2024-01-01 CRITICAL forged" in line
    assert len(line) < LOG_ARG_MAX_CHARS + 100
