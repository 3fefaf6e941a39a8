"""HTTP invocation agents with several URLs (``replica_urls``): two real SDK invocation agents
on loopback serve one agent id; calls are balanced over them, and once one is killed, the calls
go to the other (a refused connection: the call was not sent), none is run twice."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from master.agents.base_urls import BaseUrls
from master.agents.registrations import InvocationRegistration
from master.llm.model import ChatMessage, ChatResult, FunctionChatModel, ToolCallRequest
from openagent.invocation import InvocationActionAgent
from tests.factories import in_process_master

AGENT = "copies"
TOOL = {
    "name": "where",
    "description": "Which copy ran the call",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}
_ids = itertools.count()


def decide(messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None) -> ChatResult:
    """One call of the agent's tool with the query's number, then the answer (the tool's result)."""
    if messages[-1].get("role") == "tool":
        return ChatResult(content=str(messages[-1].get("content")))
    arguments = json.dumps({"n": int(str(messages[-1].get("content")))})
    call = ToolCallRequest(id=f"call_{next(_ids)}", name=f"{AGENT}__where", arguments=arguments)
    return ChatResult(content=None, tool_calls=[call])


def copy(name: str, runs: list[tuple[str, int]]) -> InvocationActionAgent:
    def where(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        runs.append((name, int(arguments["n"])))
        return {"copy": name}

    return InvocationActionAgent(AGENT, [TOOL], tool_handler=where, host="127.0.0.1", port=0)


async def skip_registration(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {}


async def test_calls_are_balanced_and_a_killed_copys_calls_go_to_the_other(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.chdir(tmp_path)  # the agents read .env from the working directory
    # The copies only serve: the test registers both URLs under the one agent id.
    monkeypatch.setattr("openagent.invocation.register_invocation_agent", skip_registration)
    runs: list[tuple[str, int]] = []
    first, second = copy("a", runs), copy("b", runs)
    await first.start()
    await second.start()
    try:
        async with (
            in_process_master(FunctionChatModel(decide)) as master,
            httpx.AsyncClient(base_url=master.base_url, timeout=60) as http,
        ):
            registered = await http.post(
                "/register",
                json={
                    "agent_id": AGENT,
                    "invocation_base_url": first.invocation_base_url,
                    "replica_urls": [second.invocation_base_url],
                    "tools": [TOOL],
                },
            )
            assert registered.status_code == 200, registered.text
            rows = (await http.get("/agents")).json()["agents"]
            [row] = [row for row in rows if row["agent_id"] == AGENT]
            assert row["replica_urls"] == [second.invocation_base_url] and row["status"] == "UP"

            async def ask(n: int) -> str:
                answer = (
                    await http.post("/query", json={"query": str(n), "allowed_agent_ids": [AGENT]})
                ).json()
                assert answer["success"] is True, answer
                return str(answer["answer"])

            answers = [await ask(n) for n in range(6)]  # one at a time: ties, taken in turn
            assert Counter(name for name, _ in runs) == {"a": 3, "b": 3}
            await asyncio.gather(*(ask(n) for n in range(6, 12)))  # at once: fewest in flight
            assert set(Counter(name for name, _ in runs)) == {"a", "b"}

            await first.stop()  # killed: its port refuses connections
            before = len(runs)
            answers = [await ask(n) for n in range(12, 18)]
            assert all("b" in answer for answer in answers), answers
            assert [name for name, _ in runs[before:]] == ["b"] * 6
            assert sorted(n for _, n in runs) == list(range(18))  # every call ran once, none twice
            rows = (await http.get("/agents")).json()["agents"]
            assert [row["status"] for row in rows if row["agent_id"] == AGENT] == ["UP"]

            await http.post("/unregister", json={"agent_id": AGENT})
    finally:
        await first.stop()
        await second.stop()


def test_a_url_is_listed_once() -> None:
    tools = [TOOL]
    with pytest.raises(ValueError, match="must not repeat invocation_base_url"):
        InvocationRegistration.model_validate(
            {
                "agent_id": AGENT,
                "invocation_base_url": "http://127.0.0.1:9000",
                "replica_urls": ["http://127.0.0.1:9000/"],
                "tools": tools,
            }
        )
    with pytest.raises(ValueError, match="must not list a URL twice"):
        InvocationRegistration.model_validate(
            {
                "agent_id": AGENT,
                "invocation_base_url": "http://127.0.0.1:9000",
                "replica_urls": ["http://127.0.0.1:9001", "http://127.0.0.1:9001"],
                "tools": tools,
            }
        )
    with pytest.raises(ValueError, match=r"replica_urls\[0\] must be an http or https URL"):
        InvocationRegistration.model_validate(
            {
                "agent_id": AGENT,
                "invocation_base_url": "http://127.0.0.1:9000",
                "replica_urls": ["ftp://127.0.0.1:9001"],
                "tools": tools,
            }
        )


def test_the_least_busy_url_first_then_in_turn_and_refused_ones_last() -> None:
    now = [0.0]
    urls = BaseUrls(["http://a", "http://b", "http://c"], clock=lambda: now[0])
    assert [urls.pick() for _ in range(3)] == [0, 1, 2]  # all idle: in turn
    urls.done(1)
    assert urls.pick() == 1  # the one with the fewest in flight
    urls.done(0), urls.done(1), urls.done(2)
    urls.refused(2)
    picks = [urls.pick() for _ in range(2)]
    assert 2 not in picks
    assert urls.pick() in (0, 1)  # still passed over while others answer
    assert urls.pick(tried=[0, 1]) == 2  # the only one left
    assert urls.pick(tried=[0, 1, 2]) is None
    now[0] += 10  # long after the refusal
    assert not urls.down(2)
