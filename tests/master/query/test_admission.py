"""Admission control: caps on queries in flight, per WebSocket connection and over the master."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from master.query.admission import Admission
from master.query.events import QueryRefused
from openagent.testing import ScriptedOpenAIServer, TextReply, ToolCall, ToolCallReply
from tests.conftest import master_env
from tests.factories import WEATHER_TOOL, MasterProcess, RawPeer


def test_slot_is_released_and_the_refusal_names_the_setting() -> None:
    admission = Admission(1)
    admission.enter()
    with pytest.raises(QueryRefused) as info:
        admission.enter()
    assert info.value.code == "too_many_queries"
    assert "OPENAGENT_MAX_QUERIES_IN_FLIGHT=1" in info.value.message
    assert admission.in_flight == 1  # the refusal took nothing
    admission.leave()
    admission.enter()
    assert admission.in_flight == 1


def test_a_tenant_over_its_cap_is_refused_while_another_is_admitted() -> None:
    admission = Admission(3, tenant_limit=1)
    admission.enter("a")
    with pytest.raises(QueryRefused) as info:
        admission.enter("a")
    assert info.value.code == "too_many_queries"
    assert "tenant 'a'" in info.value.message
    assert "OPENAGENT_TENANT_MAX_CONCURRENT_QUERIES=1" in info.value.message
    admission.enter("b")  # another tenant still gets a slot
    assert admission.in_flight == 2 and admission.by_tenant == {"a": 1, "b": 1}
    admission.leave("a")
    admission.leave("b")
    assert admission.in_flight == 0 and admission.by_tenant == {}  # no tenant is kept once idle
    admission.enter("a")


def test_without_a_tenant_cap_only_the_master_cap_counts() -> None:
    admission = Admission(2)
    admission.enter("a")
    admission.enter("a")
    assert admission.by_tenant == {}  # nothing counted per tenant: the default path is unchanged
    with pytest.raises(QueryRefused) as info:
        admission.enter("b")
    assert "OPENAGENT_MAX_QUERIES_IN_FLIGHT=2" in info.value.message


@pytest.fixture
async def capped(scripted_llm: ScriptedOpenAIServer) -> AsyncIterator[MasterProcess]:
    """A master with 2 queries per connection and 3 over the master; every query calls the held tool."""
    scripted_llm.reset()

    def script(request: dict[str, Any]) -> Any:
        if request["messages"][-1]["role"] == "tool":
            return TextReply("done")
        return ToolCallReply((ToolCall("holder__get_weather", {"city": "x"}),))

    scripted_llm.set_handler(script)
    env = master_env(
        scripted_llm,
        TOOL_CALL_TIMEOUT="60",
        OPENAGENT_WS_MAX_QUERIES_PER_CONNECTION="2",
        OPENAGENT_MAX_QUERIES_IN_FLIGHT="3",
    )
    async with MasterProcess(env) as m:
        yield m
    scripted_llm.reset()


async def test_queries_over_the_caps_are_refused_and_change_nothing(capped: MasterProcess) -> None:
    """Defect 5: frames over the per-connection cap get ``too_many_queries``; so do queries over the
    global cap, on every entry point; the queries in flight still complete."""
    holder = await RawPeer.connect(capped.ws_url)
    asker = await RawPeer.connect(capped.ws_url)
    other = await RawPeer.connect(capped.ws_url)
    try:
        await holder.register("holder", tools=[WEATHER_TOOL])
        await asker.register("asker", role="query")
        await other.register("other", role="query")
        for n in range(5):
            await asker.send({"type": "query", "query_id": f"q{n}", "query": "weather?"})
        refused = [await asker.recv() for _ in range(3)]
        assert [(r["type"], r["code"], r["ref"]) for r in refused] == [
            ("error", "too_many_queries", f"q{n}") for n in (2, 3, 4)
        ]
        assert "OPENAGENT_WS_MAX_QUERIES_PER_CONNECTION=2" in refused[0]["message"]
        held = [await holder.recv(timeout=15) for _ in range(2)]  # q0 and q1 wait for the tool

        await other.send({"type": "query", "query_id": "o0", "query": "weather?"})
        held.append(await holder.recv(timeout=15))  # the master's third and last slot
        await other.send({"type": "query", "query_id": "o1", "query": "weather?"})
        reply = await other.recv()
        assert (reply["code"], reply["ref"]) == ("too_many_queries", "o1")
        assert "OPENAGENT_MAX_QUERIES_IN_FLIGHT=3" in reply["message"]
        async with httpx.AsyncClient(base_url=capped.base_url, timeout=15) as http:
            response = await http.post("/query", json={"query": "weather?"})
            assert response.status_code == 429 and response.json()["error_code"] == "too_many_queries"
            streamed = await http.post("/query", json={"query": "weather?", "stream": True})
            assert streamed.status_code == 429

        for call in held:
            await holder.send({"type": "tool_result", "call_id": call["call_id"], "success": True})
        results = [await asker.recv(timeout=15) for _ in range(2)]
        assert sorted(r["query_id"] for r in results) == ["q0", "q1"]
        assert all(r["type"] == "query_result" and r["success"] for r in results)
        assert (await other.recv(timeout=15))["query_id"] == "o0"

        await asker.send({"type": "query", "query_id": "q5", "query": "weather?"})  # slots are free again
        call = await holder.recv(timeout=15)
        await holder.send({"type": "tool_result", "call_id": call["call_id"], "success": True})
        assert (await asker.recv(timeout=15))["query_id"] == "q5"
    finally:
        for peer in (holder, asker, other):
            await peer.close()
