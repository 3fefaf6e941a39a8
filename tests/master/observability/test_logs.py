"""Log lines carry the query, session and call they are about; OPENAGENT_LOG_FORMAT=json writes JSON lines."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx

from master.observability.logs import (
    ContextFilter,
    JSONFormatter,
    call_context,
    query_context,
    set_call,
    set_session,
)
from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import WEATHER_TOOL, MasterProcess, RawPeer


def _record(message: str) -> logging.LogRecord:
    record = logging.LogRecord("master.test", logging.WARNING, __file__, 1, message, None, None)
    ContextFilter().filter(record)
    return record


def test_context_reaches_every_record_and_ends_with_its_block() -> None:
    with query_context("q-1"):
        set_session("s-1")
        with call_context():
            set_call("c-1")
            inside = json.loads(JSONFormatter().format(_record("calling")))
        after_call = json.loads(JSONFormatter().format(_record("answered")))
    outside = json.loads(JSONFormatter().format(_record("idle")))
    assert inside["query_id"] == "q-1" and inside["session_id"] == "s-1" and inside["call_id"] == "c-1"
    assert (
        inside["message"] == "calling" and inside["level"] == "WARNING" and inside["logger"] == "master.test"
    )
    assert after_call["query_id"] == "q-1" and "call_id" not in after_call
    assert "query_id" not in outside and "session_id" not in outside


async def test_concurrent_queries_keep_their_own_ids() -> None:
    seen: dict[str, str | None] = {}

    async def query(query_id: str) -> None:
        with query_context(query_id, f"session-of-{query_id}"):
            await asyncio.sleep(0)
            seen[query_id] = _record("x").__dict__["session_id"]

    await asyncio.gather(query("a"), query("b"))
    assert seen == {"a": "session-of-a", "b": "session-of-b"}


async def test_json_lines_of_a_master_name_the_query_session_and_call(
    scripted_llm: ScriptedOpenAIServer,
) -> None:
    scripted_llm.reset()
    with MasterProcess(master_env(scripted_llm, OPENAGENT_LOG_FORMAT="json")) as m:
        peer = await RawPeer.connect(m.ws_url)
        try:
            await peer.register("logs-weather", tools=[WEATHER_TOOL])
            scripted_llm.add_tool_call("logs-weather__get_weather", {"city": "Rome"})
            scripted_llm.add_text("No idea.")
            async with httpx.AsyncClient(base_url=m.base_url, timeout=15) as http:
                pending = asyncio.create_task(http.post("/query", json={"query": "Weather in Rome?"}))
                call = await peer.recv()
                await peer.send(
                    {"type": "tool_result", "call_id": call["call_id"], "success": False, "error": "down"}
                )
                body = (await pending).json()
        finally:
            await peer.close()
        log = m.log()
    scripted_llm.reset()
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert lines and all({"ts", "level", "logger", "message"} <= line.keys() for line in lines)
    [failed] = [line for line in lines if line["message"].startswith("tool call failed")]
    assert failed["query_id"] == body["query_id"] and failed["session_id"] == body["session_id"]
    assert failed["call_id"] == call["call_id"]
