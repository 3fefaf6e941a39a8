"""Collaboration sessions through a real master: SDK and raw agents, Redis documents, guards."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from master.agents.registry import LiveAgent, Registry
from master.collaboration import CollaborationManager, CollabStore
from master.conversation.store import SessionStore
from master.errors import CollaborationRejected
from openagent import ClientConfig, CollaborationContext, CollaborationError, OrchestratorActionAgent
from openagent.testing import ScriptedOpenAIServer
from protocol import CollaborationEnd, PeerMessage
from sample_agents import negotiation_buyer, negotiation_seller
from tests.conftest import master_env
from tests.factories import EVERY_TENANT, InProcessMaster, MasterProcess, RawPeer, in_process_master

WAIT = 60.0
"""Upper bound of every wait in these tests, in seconds."""
LIMITS = {
    "OPENAGENT_COLLAB_TIMEOUT": "2",
    "OPENAGENT_COLLAB_MAX_MESSAGES": "6",
    "OPENAGENT_COLLAB_SESSION_TTL": "300",
}


@pytest.fixture(scope="module")
def limited_master(scripted_llm: ScriptedOpenAIServer) -> Iterator[MasterProcess]:
    """A master with a 2 s collaboration timeout, a cap of 6 messages and a 300 s TTL."""
    with MasterProcess(master_env(scripted_llm, **LIMITS)) as process:
        yield process


@pytest.fixture
async def http(master: MasterProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as client:
        yield client


def config_for(master: MasterProcess) -> ClientConfig:
    return ClientConfig(master_ws=master.ws_url, api_key=None, keepalive_interval=0, reconnect_max_delay=0.5)


def agent(master: MasterProcess, agent_id: str, handler: Any) -> OrchestratorActionAgent:
    async def no_tools(tool_name: str, arguments: dict[str, Any]) -> None:
        return None

    return OrchestratorActionAgent(
        agent_id, [], no_tools, collaboration_handler=handler, config=config_for(master)
    )


async def collaborate(master: MasterProcess | InProcessMaster, **body: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as client:
        return await client.post("/internal/collaborations", json=body)


def entry_types(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["type"] for entry in entries]


class Recorder:
    """Wraps a collaboration handler to keep each context and what the handler returned."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.contexts: list[CollaborationContext] = []
        self.results: list[str] = []
        self.returned = asyncio.Event()

    async def __call__(self, ctx: CollaborationContext) -> str:
        self.contexts.append(ctx)
        result = str(await self.handler(ctx))
        self.results.append(result)
        self.returned.set()
        return result

    async def end_of(self, index: int = 0) -> CollaborationEnd:
        """The end of a session as this agent saw it."""
        ctx = self.contexts[index]
        async with asyncio.timeout(WAIT):
            while not ctx.ended:
                await asyncio.sleep(0.01)
        assert ctx.end_message is not None
        return ctx.end_message


# --------------------------------------------------------------------------- a negotiation to agreement


async def test_buyer_and_seller_agree_on_a_price(
    master: MasterProcess, http: httpx.AsyncClient, redis_client: aioredis.Redis
) -> None:
    seller_handler = Recorder(negotiation_seller.handle_collaboration)
    buyer = negotiation_buyer.make_agent(config_for(master))
    seller = negotiation_seller.make_agent(config_for(master))
    seller.collaboration_handler = seller_handler
    async with buyer, seller:
        response = await http.post(
            "/internal/collaborations",
            json={
                "agents": ["buyer-agent", "seller-agent"],
                "task": "Agree on a unit price for 100 units",
                "context": {"quantity": 100},
            },
        )
        assert response.status_code == 200, response.text
        outcome = response.json()
        assert outcome["reason"] == "completed" and outcome["completed"] is True
        assert outcome["summary"] == "Agreed: 100 units at 75.00 per unit (7500.00 total)"
        assert outcome["ended_by"] == "buyer-agent"
        assert outcome["agents"] == ["buyer-agent", "seller-agent"]
        assert outcome["message_count"] == 11
        transcript = outcome["transcript"]
        assert entry_types(transcript) == ["handshake", "handshake", *["message"] * 11, "end"]
        assert [e["role"] for e in transcript[:2]] == ["initiator", "responder"]
        messages = transcript[2:-1]
        assert [m["seq"] for m in messages] == list(range(1, 12))
        assert messages[0]["content"] == {"action": "offer", "quantity": 100, "unit_price": 60.0}
        assert messages[1] == {**messages[1], "from_agent": "seller-agent", "to_agent": "buyer-agent"}
        assert messages[-1]["content"] == {"action": "accept", "unit_price": 75.0}
        prices = [m["content"]["unit_price"] for m in messages]
        assert all(negotiation_seller.FLOOR_PRICE <= p <= negotiation_seller.LIST_PRICE for p in prices[1::2])

        # the seller heard the end from the buyer, and had answered with its own view
        end = await seller_handler.end_of()
        assert end.from_agent == "buyer-agent" and end.summary == outcome["summary"] and end.reason is None
        assert seller_handler.results == ["sold at 75.00 per unit"]

    # Redis: one JSON document holding the whole exchange, indexed under its parent, with a TTL
    collab_id = outcome["collab_session_id"]
    raw = await redis_client.get(f"collab:{collab_id}")
    document = json.loads(raw)
    assert list(document)[-1] == "entries"
    assert document["entries"] == transcript
    assert document["status"] == "ended" and document["reason"] == "completed"
    assert document["parent_session_id"] == outcome["parent_session_id"]
    assert document["context"] == {"quantity": 100}
    assert 0 < await redis_client.ttl(f"collab:{collab_id}") <= 86400
    parent = outcome["parent_session_id"]
    assert await redis_client.smembers(f"collab:by_parent:{parent}") == {collab_id}
    assert 0 < await redis_client.ttl(f"collab:by_parent:{parent}") <= 86400
    assert (await http.get(f"/internal/collaborations/{collab_id}")).json() == document
    listing = (await http.get("/internal/collaborations", params={"parent_session_id": parent})).json()
    assert listing == {"parent_session_id": parent, "collab_session_ids": [collab_id]}

    # the parent orchestrator session got the collaboration turn
    turns = json.loads(await redis_client.get(f"session:{parent}"))
    assert len(turns) == 1
    assert turns[0] == {
        "decision": "collaboration",
        "collab_session_id": collab_id,
        "agents": ["buyer-agent", "seller-agent"],
        "task": "Agree on a unit price for 100 units",
        "summary": outcome["summary"],
        "message_count": 11,
        "reason": "completed",
        "ts": turns[0]["ts"],
    }


async def test_follow_up_query_sees_the_collaboration(
    master: MasterProcess, llm: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    llm.add_text("Ask the agents to negotiate.")
    first = (await http.post("/query", json={"query": "Can you buy 100 units for me?"})).json()
    assert first["success"], first
    session_id = first["session_id"]

    buyer = negotiation_buyer.make_agent(config_for(master))
    seller = negotiation_seller.make_agent(config_for(master))
    async with buyer, seller:
        response = await http.post(
            "/internal/collaborations",
            json={
                "agents": ["buyer-agent", "seller-agent"],
                "task": "Price for 100 units",
                "parent_session_id": session_id,
            },
        )
    outcome = response.json()
    assert outcome["parent_session_id"] == session_id and outcome["reason"] == "completed"

    llm.add_text("You got 100 units at 75 each.")
    follow = (
        await http.post("/query", json={"query": "What price did we get?", "session_id": session_id})
    ).json()
    assert follow["success"], follow
    replayed = json.dumps(llm.requests[-1]["messages"])
    assert "Agreed: 100 units at 75.00 per unit" in replayed


# --------------------------------------------------------------------------- guards


async def ping_pong(ctx: CollaborationContext, *, pause: float = 0.0) -> str:
    """Answer every message with the next number, forever: a runaway exchange."""
    peer = ctx.peer_ids[0]
    try:
        if ctx.role == "initiator":
            await ctx.send_message(peer, {"n": 0})
        while True:
            message = await ctx.receive_message(timeout=WAIT)
            if not isinstance(message, PeerMessage):
                return f"stopped: {message!r}"
            await asyncio.sleep(pause)
            await ctx.send_message(peer, {"n": message.content["n"] + 1})
    except CollaborationError as exc:  # the master ended the session while we were answering
        return f"stopped: {exc}"


async def test_message_cap_ends_a_runaway_exchange(
    limited_master: MasterProcess, redis_client: aioredis.Redis
) -> None:
    left, right = Recorder(ping_pong), Recorder(ping_pong)
    async with agent(limited_master, "cap-left", left), agent(limited_master, "cap-right", right):
        response = await collaborate(limited_master, agents=["cap-left", "cap-right"], task="count forever")
        outcome = response.json()
        assert outcome["reason"] == "max_messages", outcome
        assert outcome["message_count"] == 6 and outcome["ended_by"] is None
        assert "message cap of 6" in outcome["summary"]
        messages = outcome["transcript"][2:-1]
        assert [m["content"]["n"] for m in messages] == [0, 1, 2, 3, 4, 5]
        assert [m["from_agent"] for m in messages] == ["cap-left", "cap-right"] * 3
        for side in (left, right):
            end = await side.end_of()
            assert end.reason == "max_messages" and end.from_agent is None
    collab_key = f"collab:{outcome['collab_session_id']}"
    assert 0 < await redis_client.ttl(collab_key) <= 300
    assert json.loads(await redis_client.get(collab_key))["entries"][-1]["reason"] == "max_messages"


async def test_timeout_ends_a_slow_exchange(limited_master: MasterProcess) -> None:
    async def slow(ctx: CollaborationContext) -> str:
        return await ping_pong(ctx, pause=0.7)

    left, right = Recorder(slow), Recorder(slow)
    async with agent(limited_master, "slow-left", left), agent(limited_master, "slow-right", right):
        started = asyncio.get_running_loop().time()
        outcome = (
            await collaborate(limited_master, agents=["slow-left", "slow-right"], task="count slowly")
        ).json()
        elapsed = asyncio.get_running_loop().time() - started
        assert outcome["reason"] == "timeout", outcome
        assert elapsed >= 1.9  # not before its 2 s (a timer never fires early, however busy the machine)
        assert outcome["message_count"] < 6  # the timeout ended it, not the cap of 6 messages
        assert outcome["summary"].startswith("no agreement within 2 s")
        for side in (left, right):
            assert (await side.end_of()).reason == "timeout"
        assert outcome["transcript"][-1]["type"] == "end"


async def test_a_peer_disconnecting_ends_the_session(master: MasterProcess) -> None:
    heard = asyncio.Event()

    async def initiator(ctx: CollaborationContext) -> str:
        await ctx.send_message(ctx.peer_ids[0], {"hello": True})
        reply = await ctx.receive_message(timeout=WAIT)
        return f"got {reply!r}"

    async def responder(ctx: CollaborationContext) -> str:
        await ctx.receive_message(timeout=WAIT)
        heard.set()
        await asyncio.sleep(WAIT)  # never answers: its process is about to go away
        return "unreachable"

    first = Recorder(initiator)
    quitter = agent(master, "quitter", responder)
    async with agent(master, "stayer", first):
        await quitter.start()
        post = asyncio.create_task(collaborate(master, agents=["stayer", "quitter"], task="talk"))
        try:
            async with asyncio.timeout(WAIT):
                await heard.wait()
        finally:
            await quitter.stop()
        async with asyncio.timeout(WAIT):
            outcome = (await post).json()
        assert outcome["reason"] == "peer_disconnected", outcome
        assert outcome["summary"] == "agent 'quitter' disconnected after 1 messages"
        assert outcome["message_count"] == 1
        end = await first.end_of()
        assert end.reason == "peer_disconnected" and "quitter" in end.summary
        async with asyncio.timeout(WAIT):
            await first.returned.wait()
        assert first.results[0].startswith("got CollaborationEnd(")


# --------------------------------------------------------------------------- the wire contract, raw


async def raw_agent(
    master: MasterProcess | InProcessMaster, agent_id: str, *, collaborates: bool = True
) -> RawPeer:
    peer = await RawPeer.connect(master.ws_url)
    metadata = {"supports_collaboration": True} if collaborates else {}
    tool = {"name": "noop", "parameters": {"type": "object", "properties": {}}}
    await peer.send(
        {"type": "register", "agent_id": agent_id, "role": "action", "tools": [tool], "metadata": metadata}
    )
    assert await peer.recv() == {"type": "registered", "agent_id": agent_id}
    return peer


async def test_raw_peers_messages_are_stamped_recorded_and_refused_outside_the_session(
    master: MasterProcess, redis_client: aioredis.Redis
) -> None:
    alice, bob, eve = [await raw_agent(master, name) for name in ("raw-alice", "raw-bob", "raw-eve")]
    try:
        post = asyncio.create_task(collaborate(master, agents=["raw-alice", "raw-bob"], task="split a bill"))
        start_b, start_a = await bob.recv(), await alice.recv()
        sid = start_a["session_id"]
        assert start_a["role"] == "initiator" and start_b["role"] == "responder"
        assert start_b["session_id"] == sid and start_a["task"] == "split a bill" and start_a["context"] == {}
        assert start_a["peers"] == [
            {
                "agent_id": "raw-bob",
                "metadata": {"supports_collaboration": True},
                "tools": [
                    {
                        "name": "noop",
                        "description": "",
                        "parameters": {"type": "object", "properties": {}},
                        "endpoint": None,
                        "annotations": None,
                        "requires_approval": False,
                    }
                ],
            }
        ]
        assert [p["agent_id"] for p in start_b["peers"]] == ["raw-alice"]

        async def refused(peer: RawPeer, frame: dict[str, Any], code: str, text: str) -> None:
            await peer.send(frame)
            reply = await peer.recv()
            assert reply["type"] == "error" and reply["code"] == code, reply
            assert text in reply["message"] and reply["ref"] == frame["session_id"], reply

        message = {"type": "peer_message", "session_id": sid, "content": {"x": 1}}
        await refused(
            alice, {**message, "to_agent": "raw-eve"}, "not_in_session", "agent 'raw-eve' is not in"
        )
        await refused(eve, {**message, "to_agent": "raw-bob"}, "not_in_session", "agent 'raw-eve' is not in")
        await refused(eve, {"type": "collaboration_end", "session_id": sid}, "not_in_session", "'raw-eve'")
        await refused(
            alice, {**message, "session_id": "nope", "to_agent": "raw-bob"}, "unknown_session", "'nope'"
        )
        await refused(alice, {**message, "to_agent": "raw-alice"}, "invalid_message", "to itself")
        await refused(alice, message, "invalid_message", "needs 'to_agent'")

        # from_agent is stamped by the master; empty objects and lists survive the trip and Redis
        await alice.send({**message, "to_agent": "raw-bob", "from_agent": "raw-eve", "content": {}})
        assert await bob.recv() == {
            "type": "peer_message",
            "session_id": sid,
            "to_agent": "raw-bob",
            "from_agent": "raw-alice",
            "content": {},
        }
        empties = {"items": [], "meta": {}, "nested": [{}, []]}
        await bob.send({**message, "to_agent": "raw-alice", "content": empties})
        assert (await alice.recv())["content"] == empties

        await bob.send({"type": "collaboration_end", "session_id": sid, "summary": "Alice pays"})
        assert await alice.recv() == {
            "type": "collaboration_end",
            "session_id": sid,
            "summary": "Alice pays",
            "from_agent": "raw-bob",
            "reason": None,
        }
        outcome = (await post).json()
        assert (
            outcome["reason"] == "completed"
            and outcome["ended_by"] == "raw-bob"
            and outcome["message_count"] == 2
        )
        await refused(
            alice, {**message, "to_agent": "raw-bob"}, "unknown_session", "already ended (completed)"
        )
        await bob.send({"type": "collaboration_end", "session_id": sid, "summary": "again"})  # ignored
        await bob.send({"type": "ping"})
        assert await bob.recv() == {"type": "pong"}
    finally:
        for peer in (alice, bob, eve):
            await peer.close()

    document = json.loads(await redis_client.get(f"collab:{sid}"))
    assert entry_types(document["entries"]) == ["handshake", "handshake", "message", "message", "end"]
    first, second = document["entries"][2:4]
    assert first["content"] == {} and first["from_agent"] == "raw-alice"
    assert second["content"] == empties
    assert document["entries"][-1] == {
        **document["entries"][-1],
        "from_agent": "raw-bob",
        "summary": "Alice pays",
    }


async def test_bad_requests_are_refused_with_clear_messages(
    master: MasterProcess, http: httpx.AsyncClient
) -> None:
    plain = await raw_agent(master, "raw-plain", collaborates=False)
    able = await raw_agent(master, "raw-able")
    try:
        cases = [
            # refused by the request schema (422), as the OpenAPI document declares
            ({"agents": ["raw-able"], "task": "t"}, 422, "at least 2 items"),
            ({"agents": ["raw-able", "raw-able"], "task": "t"}, 422, "agent 'raw-able' is listed twice"),
            ({"agents": ["raw-able", "ghost"], "task": "t"}, 400, "unknown agent 'ghost'"),
            ({"agents": ["raw-able", "raw-plain"], "task": "t"}, 409, "agent 'raw-plain' does not support"),
            ({"agents": ["raw-able", "raw-plain"], "task": "   "}, 422, "task"),
            ({"agents": ["raw-able", "raw-plain"], "task": "t", "parent_session_id": "gone"}, 404, "'gone'"),
        ]
        for body, status, text in cases:
            response = await http.post("/internal/collaborations", json=body)
            assert response.status_code == status, (body, response.text)
            assert text in response.text, response.text
        assert (await http.post("/internal/collaborations", json={"agents": []})).status_code == 422
        missing = await http.get("/internal/collaborations/no-such-collab")
        assert missing.status_code == 404 and "'no-such-collab'" in missing.json()["detail"]
    finally:
        await plain.close()
        await able.close()


async def test_disabled_collaboration(llm: ScriptedOpenAIServer) -> None:
    async with in_process_master(openai_base_url=llm.base_url, openagent_collaboration=False) as off:
        peer = await raw_agent(off, "raw-off")
        try:
            response = await collaborate(off, agents=["raw-off", "raw-off-2"], task="t")
            assert response.status_code == 403 and "OPENAGENT_COLLABORATION=0" in response.json()["detail"]
            await peer.send({"type": "peer_message", "session_id": "s", "to_agent": "x", "content": {}})
            reply = await peer.recv()
            assert reply["code"] == "not_implemented" and "OPENAGENT_COLLABORATION=0" in reply["message"]
        finally:
            await peer.close()


# --------------------------------------------------------------------------- the manager and store, in process


class FakeConnection:
    """Stands in for a WebSocket: keeps the frames the manager sends."""

    def __init__(self) -> None:
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def send(self, frame: str) -> None:
        await self.frames.put(json.loads(frame))

    async def close(self, code: int, reason: str) -> None:
        return None

    async def next(self) -> dict[str, Any]:
        async with asyncio.timeout(WAIT):
            return await self.frames.get()


def live_agent(
    registry: Registry, agent_id: str, *, collaborates: bool = True
) -> tuple[LiveAgent, FakeConnection]:
    conn = FakeConnection()
    metadata = {"supports_collaboration": True} if collaborates else {"supports_collaboration": "yes"}
    agent = LiveAgent(agent_id, "action", metadata, {}, conn.send, conn.close)
    registry.add(agent)
    return agent, conn


def manager_with(redis_client: aioredis.Redis, registry: Registry, **limits: Any) -> CollaborationManager:
    return CollaborationManager(
        registry,
        CollabStore(redis_client, ttl_seconds=60),
        SessionStore(redis_client, ttl_seconds=60),
        enabled=limits.pop("enabled", True),
        timeout=limits.pop("timeout", WAIT),
        max_messages=limits.pop("max_messages", 50),
    )


async def test_eligible_agents_are_connected_and_declare_support(redis_client: aioredis.Redis) -> None:
    registry = Registry()
    live_agent(registry, "a")
    live_agent(registry, "b", collaborates=False)  # a truthy string is not ``true``
    live_agent(registry, "c")
    manager = manager_with(redis_client, registry)
    assert manager.eligible(["c", "b", "ghost", "a", "c"]) == ["c", "a"]
    assert manager_with(redis_client, registry, enabled=False).eligible(["a", "c"]) == []
    with pytest.raises(CollaborationRejected, match="'b' does not support collaboration") as rejected:
        await manager.run(parent_session_id="p", agent_ids=["a", "b"], task="t", scope=EVERY_TENANT)
    assert rejected.value.code == "collaboration_unsupported"


async def test_one_redis_round_trip_per_relayed_message(
    redis_client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = Registry()
    alice, alice_conn = live_agent(registry, "unit-alice")
    bob, bob_conn = live_agent(registry, "unit-bob")
    manager = manager_with(redis_client, registry)
    parent = f"unit-parent-{uuid.uuid4()}"
    run = asyncio.create_task(
        manager.run(
            parent_session_id=parent,
            agent_ids=["unit-alice", "unit-bob"],
            task="t",
            scope=EVERY_TENANT,
            query_id="q-7",
        )
    )
    assert (await bob_conn.next())["role"] == "responder"  # responders are introduced first
    sid = (await alice_conn.next())["session_id"]

    commands: list[str] = []
    original = redis_client.execute_command

    async def counting(*args: Any, **kwargs: Any) -> Any:
        commands.append(str(args[0]))
        return await original(*args, **kwargs)

    monkeypatch.setattr(redis_client, "execute_command", counting)
    for n in range(3):
        sender, receiver = (alice, bob_conn) if n % 2 == 0 else (bob, alice_conn)
        target = "unit-bob" if sender is alice else "unit-alice"
        message = PeerMessage(session_id=sid, to_agent=target, content={"n": n, "empty": []})
        assert await manager.on_peer_message(sender, message) is None
        assert (await receiver.next())["content"] == {"n": n, "empty": []}
    assert commands[-2:] == ["EVALSHA", "EVALSHA"]  # the first call may also load the script
    assert len([c for c in commands if c == "EVALSHA"]) == 3
    monkeypatch.undo()

    assert await manager.on_end(bob, CollaborationEnd(session_id=sid, summary="deal")) is None
    assert (await alice_conn.next())["from_agent"] == "unit-bob"
    async with asyncio.timeout(WAIT):
        outcome = await run
    assert (outcome.reason, outcome.summary, outcome.message_count) == ("completed", "deal", 3)
    turns = await SessionStore(redis_client, ttl_seconds=60).load(parent, EVERY_TENANT)
    assert turns is not None and turns[-1]["query_id"] == "q-7" and turns[-1]["decision"] == "collaboration"


async def test_store_appends_keep_empty_containers_and_never_create_documents(
    redis_client: aioredis.Redis,
) -> None:
    store = CollabStore(redis_client, ttl_seconds=60)
    sid = f"unit-{uuid.uuid4()}"
    await store.save({"collab_session_id": sid, "entries": [], "context": {}, "agents": []})
    for entry in ({"type": "message", "content": {}}, {"type": "message", "content": {"a": [], "b": [{}]}}):
        assert await store.append(sid, entry)
    document = await store.load(sid, EVERY_TENANT)
    assert document == {
        "collab_session_id": sid,
        "context": {},
        "agents": [],
        "entries": [{"type": "message", "content": {}}, {"type": "message", "content": {"a": [], "b": [{}]}}],
    }
    assert not await store.append(f"unit-missing-{uuid.uuid4()}", {"type": "message"})
    assert await store.load(f"unit-missing-{uuid.uuid4()}", EVERY_TENANT) is None
