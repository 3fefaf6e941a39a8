"""The SDK side of collaboration: CollaborationContext and the rules for ending a session."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

import openagent
from openagent import CollaborationContext, CollaborationError, ConfigurationError, OrchestratorActionAgent
from protocol import (
    CollaborationEnd,
    CollaborationPeer,
    CollaborationStart,
    ErrorMessage,
    Message,
    PeerMessage,
    ToolCall,
    ToolResult,
)
from tests.factories import MasterProcess
from tests.openagent.conftest import WAIT, FakeMaster, eventually, fast_config

PEER = CollaborationPeer(agent_id="peer-agent", metadata={"supports_collaboration": True})


async def echo(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return arguments


def collaborator(master: FakeMaster, handler: Any, agent_id: str = "collab-agent") -> OrchestratorActionAgent:
    return OrchestratorActionAgent(
        agent_id, [{"name": "echo"}], echo, collaboration_handler=handler, config=fast_config(master.url)
    )


def start(role: str = "initiator", session_id: str = "s1", **extra: Any) -> CollaborationStart:
    return CollaborationStart(
        session_id=session_id, task="agree", peers=[PEER], role=role, context={"quantity": 100}, **extra
    )


async def next_collab_frame(master: FakeMaster) -> Message:
    """The next frame an agent sent, skipping nothing: collaboration tests expect exact order."""
    _, frame = await master.next_frame()
    return frame


async def test_initiator_return_value_becomes_the_summary(fake_master: FakeMaster) -> None:
    seen: list[CollaborationContext] = []

    async def handler(ctx: CollaborationContext) -> str:
        seen.append(ctx)
        await ctx.send_message("peer-agent", {"proposal": 70.0, "terms": [], "extra": {}})
        reply = await ctx.receive_message(timeout=WAIT)
        assert isinstance(reply, PeerMessage)
        return f"agreed on {reply.content['price']}"

    async with collaborator(fake_master, handler):
        await fake_master.next_registration()
        await fake_master.send("collab-agent", start())
        sent = await next_collab_frame(fake_master)
        assert sent == PeerMessage(
            session_id="s1", to_agent="peer-agent", content={"proposal": 70.0, "terms": [], "extra": {}}
        )
        reply = PeerMessage(
            session_id="s1", from_agent="peer-agent", to_agent="collab-agent", content={"price": 72}
        )
        await fake_master.send("collab-agent", reply)
        assert await next_collab_frame(fake_master) == CollaborationEnd(
            session_id="s1", summary="agreed on 72"
        )
    ctx = seen[0]
    assert (ctx.session_id, ctx.task, ctx.role, ctx.context) == (
        "s1",
        "agree",
        "initiator",
        {"quantity": 100},
    )
    assert ctx.peers == [
        {"agent_id": "peer-agent", "metadata": {"supports_collaboration": True}, "tools": []}
    ]
    assert ctx.peer_ids == ["peer-agent"] and ctx.agent_id == "collab-agent"
    assert ctx.ended and ctx.end_message is not None and ctx.end_message.from_agent == "collab-agent"


async def test_responder_return_leaves_the_session_open(fake_master: FakeMaster) -> None:
    returned = asyncio.Event()

    async def handler(ctx: CollaborationContext) -> str:
        message = await ctx.receive_message(timeout=WAIT)
        assert isinstance(message, PeerMessage) and message.from_agent == "peer-agent"
        await ctx.send_message(message.from_agent, {"accept": True})
        returned.set()
        return "Accepted"

    async with collaborator(fake_master, handler):
        await fake_master.next_registration()
        await fake_master.send("collab-agent", start("responder"))
        await fake_master.send(
            "collab-agent", PeerMessage(session_id="s1", from_agent="peer-agent", content={"proposal": 70.0})
        )
        assert await next_collab_frame(fake_master) == PeerMessage(
            session_id="s1", to_agent="peer-agent", content={"accept": True}
        )
        async with asyncio.timeout(WAIT):
            await returned.wait()
        # no collaboration_end from a responder: the next frame is the answer to a tool call
        await fake_master.send("collab-agent", ToolCall(call_id="c1", tool_name="echo", arguments={"a": 1}))
        assert await next_collab_frame(fake_master) == ToolResult(call_id="c1", success=True, result={"a": 1})
        # the initiator's end still reaches the session quietly
        await fake_master.send(
            "collab-agent", CollaborationEnd(session_id="s1", summary="done", from_agent="peer-agent")
        )


async def test_explicit_end_and_ending_twice(fake_master: FakeMaster) -> None:
    async def handler(ctx: CollaborationContext) -> str:
        await ctx.end("we agree")
        await ctx.end("ignored")  # already over: nothing is sent
        with pytest.raises(CollaborationError, match="is over"):
            await ctx.send_message("peer-agent", {})
        ended = await ctx.receive_message(timeout=WAIT)
        assert isinstance(ended, CollaborationEnd) and ended.summary == "we agree"
        return "not sent: the session is already over"

    async with collaborator(fake_master, handler):
        await fake_master.next_registration()
        await fake_master.send("collab-agent", start("responder"))
        assert await next_collab_frame(fake_master) == CollaborationEnd(session_id="s1", summary="we agree")
        await fake_master.send("collab-agent", ToolCall(call_id="c1", tool_name="echo"))
        assert isinstance(await next_collab_frame(fake_master), ToolResult)


async def test_a_failing_handler_ends_the_session_with_its_error(fake_master: FakeMaster) -> None:
    async def handler(ctx: CollaborationContext) -> str:
        raise ValueError("no budget for 100 units")

    async with collaborator(fake_master, handler):
        await fake_master.next_registration()
        await fake_master.send("collab-agent", start("responder"))
        assert await next_collab_frame(fake_master) == CollaborationEnd(
            session_id="s1", summary="ValueError: no budget for 100 units", reason="handler_error"
        )


async def test_receive_message_timeout_end_and_misuse(fake_master: FakeMaster) -> None:
    results: list[Any] = []
    done, timed_out = asyncio.Event(), asyncio.Event()

    async def handler(ctx: CollaborationContext) -> str:
        results.append(await ctx.receive_message(timeout=0.05))
        timed_out.set()
        with pytest.raises(CollaborationError, match="agent 'stranger' is not a peer") as refused:
            await ctx.send_message("stranger", {})
        assert refused.value.session_id == "s1"
        results.append(await ctx.receive_message(timeout=WAIT))  # a message queued before the end
        results.append(await ctx.receive_message(timeout=WAIT))  # the end
        results.append(await ctx.receive_message(timeout=WAIT))  # the end again, at once
        with pytest.raises(CollaborationError, match=r"is over \(timeout\)"):
            await ctx.send_message("peer-agent", {})
        done.set()
        return "unused"

    async with collaborator(fake_master, handler):
        await fake_master.next_registration()
        await fake_master.send("collab-agent", start("responder"))
        async with asyncio.timeout(WAIT):  # the first receive has timed out with nothing queued
            await timed_out.wait()
        await fake_master.send(
            "collab-agent", PeerMessage(session_id="s1", from_agent="peer-agent", content={"n": 1})
        )
        end = CollaborationEnd(session_id="s1", summary="no agreement within 2 s", reason="timeout")
        await fake_master.send("collab-agent", end)
        async with asyncio.timeout(WAIT):
            await done.wait()
    assert results[0] is None
    assert isinstance(results[1], PeerMessage) and results[1].content == {"n": 1}
    assert results[2] == results[3] == end


async def test_errors_about_a_session_are_kept_and_lost_connections_end_it(fake_master: FakeMaster) -> None:
    contexts: list[CollaborationContext] = []
    finished = asyncio.Event()

    async def handler(ctx: CollaborationContext) -> str:
        contexts.append(ctx)
        ended = await ctx.receive_message(timeout=WAIT)
        assert isinstance(ended, CollaborationEnd)
        finished.set()
        return "lost"

    async with collaborator(fake_master, handler):
        await fake_master.next_registration()
        await fake_master.send("collab-agent", start("responder"))
        await eventually(lambda: bool(contexts))
        error = ErrorMessage(
            code="not_in_session", message="agent 'x' is not in collaboration session 's1'", ref="s1"
        )
        await fake_master.send("collab-agent", error)
        await eventually(lambda: contexts[0].errors == [error])
        fake_master.abort_connection("collab-agent")
        async with asyncio.timeout(WAIT):
            await finished.wait()
        assert contexts[0].end_message is not None and contexts[0].end_message.reason == "connection_lost"
        await fake_master.next_registration()  # it reconnects as usual


def test_collaboration_handler_must_be_callable() -> None:
    with pytest.raises(ConfigurationError, match="collaboration_handler of agent 'a' is not callable"):
        OrchestratorActionAgent(
            "a", [], echo, collaboration_handler="nope", config=fast_config("ws://127.0.0.1:1/ws")
        )


# --------------------------------------------------------------------------- the spec's example, as written


async def test_spec_example_runs_as_written(master: MasterProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MASTER_WS", master.ws_url)
    monkeypatch.setenv("WS_KEEPALIVE_INTERVAL", "0")

    # ---- from the spec ("Pass a collaboration_handler to OrchestratorActionAgent"), unchanged
    from openagent import OrchestratorActionAgent, ToolSchema
    from openagent.client import CollaborationContext

    async def handle_tool(tool_name, arguments, *, progress_callback=None): ...

    async def handle_collaboration(ctx: CollaborationContext) -> str:
        if ctx.role == "initiator":
            await ctx.send_message(ctx.peers[0]["agent_id"], {"proposal": 70.0})
            reply = await ctx.receive_message(timeout=60)
            # reply is a PeerMessage or CollaborationEnd or None (timeout)
            return f"Agreed on {reply.content}"
        else:
            msg = await ctx.receive_message(timeout=60)
            await ctx.send_message(msg.from_agent, {"accept": True})
            return "Accepted"

    TOOLS = [ToolSchema(name="negotiate", description="Negotiates")]
    agent = OrchestratorActionAgent(
        "my-agent",
        TOOLS,
        handle_tool,
        collaboration_handler=handle_collaboration,
    )
    # ---- end of the spec's code; a second agent runs the same handler
    assert CollaborationContext is openagent.CollaborationContext
    peer = OrchestratorActionAgent("my-peer", TOOLS, handle_tool, collaboration_handler=handle_collaboration)

    async with agent, peer, httpx.AsyncClient(base_url=master.base_url, timeout=WAIT) as http:
        response = await http.post(
            "/internal/collaborations", json={"agents": ["my-agent", "my-peer"], "task": "Agree on a price"}
        )
    outcome = response.json()
    assert outcome["reason"] == "completed", outcome
    assert outcome["summary"] == "Agreed on {'accept': True}"
    assert outcome["ended_by"] == "my-agent" and outcome["message_count"] == 2
    contents = [entry["content"] for entry in outcome["transcript"] if entry["type"] == "message"]
    assert contents == [{"proposal": 70.0}, {"accept": True}]
