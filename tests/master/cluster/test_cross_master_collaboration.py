"""Collaborations between SDK agents on two real master processes (one Redis, OPENAGENT_CLUSTER=1),
and the trace of a query on one master through an agent on the other."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from typing import Any

import httpx
import pytest

from openagent import CollaborationContext, OrchestratorActionAgent
from openagent.config import ClientConfig
from openagent.testing import ScriptedOpenAIServer
from protocol import CollaborationEnd, PeerMessage
from tests.factories import WEATHER_TOOL, MasterProcess, RawPeer
from tests.master.cluster.test_two_masters import cluster_env, row, rows_until
from tests.openagent.conftest import fast_config

TOOLS = [{"name": "negotiate", "description": "Negotiates"}]


async def no_tool(tool_name: str, arguments: dict[str, Any]) -> None:
    return None


def agent(master: MasterProcess, agent_id: str, handler: Any) -> OrchestratorActionAgent:
    config = fast_config(master.ws_url, reconnect_initial_delay=0.2, reconnect_max_delay=1.0)
    return OrchestratorActionAgent(agent_id, TOOLS, no_tool, collaboration_handler=handler, config=config)


async def negotiate(ctx: CollaborationContext) -> str:
    """The spec's example handler: the initiator proposes, the responder accepts."""
    if ctx.role == "initiator":
        await ctx.send_message(ctx.peers[0]["agent_id"], {"proposal": 70.0})
        reply = await ctx.receive_message(timeout=60)
        assert isinstance(reply, PeerMessage), reply
        return f"Agreed on {reply.content}"
    message = await ctx.receive_message(timeout=60)
    assert isinstance(message, PeerMessage), message
    await ctx.send_message(str(message.from_agent), {"accept": True})
    return "Accepted"


async def visible(master: MasterProcess, agent_id: str) -> None:
    await rows_until(master.base_url, lambda rows: row(rows, agent_id) is not None)


@pytest.mark.parametrize("started_on", ["initiator's master", "responder's master"])
async def test_collaboration_between_agents_on_two_masters(
    llm: ScriptedOpenAIServer, started_on: str
) -> None:
    suffix = "a" if started_on == "initiator's master" else "b"
    buyer, seller = f"x-buyer-{suffix}", f"x-seller-{suffix}"
    with (
        MasterProcess(cluster_env(llm, OPENAGENT_MASTER_ID=f"collab-a-{suffix}")) as a,
        MasterProcess(cluster_env(llm, OPENAGENT_MASTER_ID=f"collab-b-{suffix}")) as b,
    ):
        async with agent(a, buyer, negotiate), agent(b, seller, negotiate):
            owner = a if started_on == "initiator's master" else b
            await visible(owner, buyer)
            await visible(owner, seller)
            async with httpx.AsyncClient(timeout=60) as http:
                response = await http.post(
                    f"{owner.base_url}/internal/collaborations",
                    json={"agents": [buyer, seller], "task": "Agree on a price"},
                )
                outcome = response.json()
                other = b if owner is a else a
                stored = (
                    await http.get(f"{other.base_url}/internal/collaborations/{outcome['collab_session_id']}")
                ).json()
    assert response.status_code == 200, outcome
    assert outcome["reason"] == "completed", outcome
    assert outcome["summary"] == "Agreed on {'accept': True}"
    assert outcome["ended_by"] == buyer and outcome["message_count"] == 2
    messages = [entry for entry in outcome["transcript"] if entry["type"] == "message"]
    assert [(m["from_agent"], m["to_agent"], m["content"]) for m in messages] == [
        (buyer, seller, {"proposal": 70.0}),
        (seller, buyer, {"accept": True}),
    ]
    assert stored["status"] == "ended" and stored["reason"] == "completed"


@pytest.mark.parametrize(
    ("stop", "summary"),
    [
        # kill -9: the session ends when the peer's master's lease expires, not at the collaboration timeout.
        (signal.SIGKILL, ("stopped answering", "lease expired")),
        # SIGTERM: the drain hands the peer off (1012), which ends the session at once.
        (signal.SIGTERM, ("disconnected from master",)),
    ],
    ids=["kill", "sigterm"],
)
async def test_the_peers_master_stopping_ends_the_collaboration(
    llm: ScriptedOpenAIServer, stop: signal.Signals, summary: tuple[str, ...]
) -> None:
    proposed = asyncio.Event()
    endings: list[Any] = []

    async def initiator(ctx: CollaborationContext) -> str:
        await ctx.send_message(ctx.peers[0]["agent_id"], {"proposal": 70.0})
        endings.append(await ctx.receive_message(timeout=120))
        return "no deal"

    async def silent_peer(ctx: CollaborationContext) -> str:
        await ctx.receive_message(timeout=120)
        proposed.set()
        await ctx.receive_message(timeout=120)  # never answers
        return "silent"

    buyer, seller = f"buyer-{stop.name.lower()}", f"seller-{stop.name.lower()}"
    with (
        MasterProcess(cluster_env(llm, OPENAGENT_COLLAB_TIMEOUT="300")) as a,
        MasterProcess(cluster_env(llm)) as b,
    ):
        async with agent(a, buyer, initiator), agent(b, seller, silent_peer):
            await visible(a, seller)
            async with httpx.AsyncClient(base_url=a.base_url, timeout=120) as http:
                pending = asyncio.create_task(
                    http.post(
                        "/internal/collaborations",
                        json={"agents": [buyer, seller], "task": "Agree on a price"},
                    )
                )
                async with asyncio.timeout(30):
                    await proposed.wait()
                assert b.process is not None
                b.process.send_signal(stop)
                outcome = (await pending).json()
    assert outcome["reason"] == "peer_disconnected", outcome
    assert seller in outcome["summary"] and all(part in outcome["summary"] for part in summary), outcome
    assert outcome["message_count"] == 1
    [ending] = endings
    assert isinstance(ending, CollaborationEnd) and ending.reason == "peer_disconnected"


async def test_killed_owner_master_ends_the_session_for_the_peer_on_the_other(
    llm: ScriptedOpenAIServer,
) -> None:
    proposed = asyncio.Event()
    endings: list[Any] = []

    async def initiator(ctx: CollaborationContext) -> str:
        await ctx.send_message(ctx.peers[0]["agent_id"], {"proposal": 70.0})
        await ctx.receive_message(timeout=120)  # its master dies meanwhile
        return "lost"

    async def peer(ctx: CollaborationContext) -> str:
        await ctx.receive_message(timeout=120)
        proposed.set()
        endings.append(await ctx.receive_message(timeout=120))
        return "alone"

    with MasterProcess(cluster_env(llm)) as a, MasterProcess(cluster_env(llm)) as b:
        async with agent(a, "orphan-buyer", initiator), agent(b, "orphan-seller", peer):
            await visible(a, "orphan-seller")
            async with httpx.AsyncClient(base_url=a.base_url, timeout=120) as http:
                pending = asyncio.create_task(
                    http.post(
                        "/internal/collaborations",
                        json={"agents": ["orphan-buyer", "orphan-seller"], "task": "Agree on a price"},
                    )
                )
                async with asyncio.timeout(30):
                    await proposed.wait()
                assert a.process is not None
                os.kill(a.process.pid, signal.SIGKILL)
                a.process.wait(timeout=10)
                with pytest.raises(httpx.HTTPError):
                    await pending
                async with asyncio.timeout(60):
                    while not endings:
                        await asyncio.sleep(0.05)
    [ending] = endings
    assert isinstance(ending, CollaborationEnd) and ending.reason == "peer_disconnected", ending
    assert "running the collaboration stopped answering" in ending.summary


async def test_query_starts_a_negotiation_across_masters(llm: ScriptedOpenAIServer) -> None:
    from sample_agents import negotiation_buyer, negotiation_seller

    with MasterProcess(cluster_env(llm)) as a, MasterProcess(cluster_env(llm)) as b:
        buyer = negotiation_buyer.make_agent(ClientConfig(master_ws=a.ws_url, api_key=None))
        seller = negotiation_seller.make_agent(ClientConfig(master_ws=b.ws_url, api_key=None))
        async with buyer, seller:
            await visible(a, "seller-agent")
            llm.add_tool_call(
                "start_collaboration",
                {"agents": ["buyer-agent", "seller-agent"], "task": "Agree on a price for 100 units"},
            )
            llm.add_text("They agreed.")
            async with httpx.AsyncClient(base_url=a.base_url, timeout=60) as http:
                body = (
                    await http.post(
                        "/query",
                        json={
                            "query": "Have the buyer and seller agree on a price for 100 units",
                            "allowed_agent_ids": ["buyer-agent", "seller-agent"],
                        },
                    )
                ).json()
    assert body["success"], body
    assert "start_collaboration" in [t["function"]["name"] for t in llm.requests[0]["tools"]]
    outcome = json.loads(llm.requests[1]["messages"][-1]["content"])["result"]
    assert outcome["completed"] and outcome["agents"] == ["buyer-agent", "seller-agent"], outcome
    assert outcome["message_count"] > 1 and "75" in outcome["summary"]


async def test_remote_peer_refusals_and_disconnect(llm: ScriptedOpenAIServer) -> None:
    """A raw peer on master B: the owner's refusal reaches it as an ``error``; its disconnect ends the session."""
    heard_hi = asyncio.Event()

    async def initiator(ctx: CollaborationContext) -> str:
        heard = await ctx.receive_message(timeout=120)
        assert isinstance(heard, PeerMessage) and heard.content == {"hi": 1}, heard
        heard_hi.set()
        ended = await ctx.receive_message(timeout=120)  # the master's end, once the peer is gone
        return f"ended: {ended}"

    with MasterProcess(cluster_env(llm)) as a, MasterProcess(cluster_env(llm)) as b:
        peer = await RawPeer.connect(b.ws_url)
        await peer.send(
            {
                "type": "register",
                "agent_id": "raw-seller",
                "role": "action",
                "tools": [WEATHER_TOOL],
                "metadata": {"supports_collaboration": True},
            }
        )
        assert (await peer.recv())["type"] == "registered"
        async with agent(a, "raw-buyer", initiator):
            await visible(a, "raw-seller")
            async with httpx.AsyncClient(base_url=a.base_url, timeout=120) as http:
                pending = asyncio.create_task(
                    http.post(
                        "/internal/collaborations", json={"agents": ["raw-buyer", "raw-seller"], "task": "t"}
                    )
                )
                start = await peer.recv()
                assert start["type"] == "collaboration_start" and start["role"] == "responder"
                assert [p["agent_id"] for p in start["peers"]] == ["raw-buyer"]
                assert start["peers"][0]["metadata"]["supports_collaboration"] is True
                sid = start["session_id"]
                await peer.send(
                    {"type": "peer_message", "session_id": sid, "to_agent": "nobody", "content": {}}
                )
                refused = await peer.recv()
                assert refused["type"] == "error" and refused["code"] == "not_in_session", refused
                assert refused["ref"] == sid and "nobody" in refused["message"]
                await peer.send(
                    {"type": "peer_message", "session_id": sid, "to_agent": "raw-buyer", "content": {"hi": 1}}
                )
                async with asyncio.timeout(30):
                    await heard_hi.wait()
                await peer.close()
                outcome = (await pending).json()
    assert outcome["reason"] == "peer_disconnected", outcome
    assert "raw-seller" in outcome["summary"] and "disconnected" in outcome["summary"]
    assert outcome["message_count"] == 1


# --------------------------------------------------------------------------- the trace across masters

_QUERY_SPAN = re.compile(r'"name": "query",\s*"context": \{\s*"trace_id": "0x([0-9a-f]{32})"')
_REMOTE_SPAN = re.compile(
    r'"name": "remote tool trace-weather\.get_weather",\s*"context": \{\s*"trace_id": "0x([0-9a-f]{32})"'
)


async def test_remote_tool_call_continues_the_callers_trace(llm: ScriptedOpenAIServer) -> None:
    tracing = {"OTEL_TRACES_EXPORTER": "console", "OTEL_BSP_SCHEDULE_DELAY": "100", "PYTHONUNBUFFERED": "1"}
    with MasterProcess(cluster_env(llm, **tracing)) as a, MasterProcess(cluster_env(llm, **tracing)) as b:
        peer = await RawPeer.connect(a.ws_url)
        try:
            await peer.register("trace-weather", tools=[WEATHER_TOOL])
            await visible(b, "trace-weather")
            llm.add_tool_call("trace-weather__get_weather", {"city": "Lima"})
            llm.add_text("Warm.")
            async with httpx.AsyncClient(base_url=b.base_url, timeout=60) as http:
                pending = asyncio.create_task(http.post("/query", json={"query": "Weather in Lima?"}))
                call = await peer.recv(timeout=30)
                await peer.send(
                    {"type": "tool_result", "call_id": call["call_id"], "success": True, "result": 1}
                )
                assert (await pending).json()["success"] is True
        finally:
            await peer.close()
    assert call["type"] == "tool_call" and call.get("traceparent"), call
    agent_trace = call["traceparent"].split("-")[1]
    b_log, a_log = b.log_path.read_text(errors="replace"), a.log_path.read_text(errors="replace")
    assert _QUERY_SPAN.findall(b_log) == [agent_trace]  # B's query span: the trace the agent joined
    assert _REMOTE_SPAN.findall(a_log) == [agent_trace]  # A's relay span sits in that trace too


async def test_a_master_with_collaboration_off_does_not_relay(llm: ScriptedOpenAIServer) -> None:
    async def initiator(ctx: CollaborationContext) -> str:
        await ctx.receive_message(timeout=120)
        return "unused"

    with (
        MasterProcess(cluster_env(llm)) as a,
        MasterProcess(cluster_env(llm, OPENAGENT_COLLABORATION="0")) as b,
    ):
        peer = await RawPeer.connect(b.ws_url)
        await peer.send(
            {
                "type": "register",
                "agent_id": "off-seller",
                "role": "action",
                "tools": [],
                "metadata": {"supports_collaboration": True},
            }
        )
        assert (await peer.recv())["type"] == "registered"
        try:
            async with agent(a, "off-buyer", initiator):
                await visible(a, "off-seller")
                async with httpx.AsyncClient(base_url=a.base_url, timeout=120) as http:
                    response = await http.post(
                        "/internal/collaborations", json={"agents": ["off-buyer", "off-seller"], "task": "t"}
                    )
        finally:
            await peer.close()
    outcome = response.json()
    assert outcome["reason"] == "peer_disconnected", outcome
    assert "collaboration is disabled on master" in outcome["summary"]
