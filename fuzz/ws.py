"""The WebSocket fuzzer, and the well-behaved agents whose work it must not disturb.

Well-behaved: ``fuzz-echo`` (an action agent answering every ``tool_call`` with its text) and
``fuzz-asker`` (a query agent asking, one after another, for the echo of a fresh nonce). A loop
query fails when it gets no result, an unsuccessful one, or an answer without its nonce; a
well-behaved connection that closes is "dropped".

The fuzzer, on connections of its own, sends a seeded random mix of malformed JSON, binary
frames, oversized frames (the master closes with 1009, the fuzzer reconnects), deeply nested
frames, wrong-typed and unknown frames, and spoofed ones: ``tool_result`` and ``tool_progress``
for the echo agent's calls in flight, ``peer_message`` with a forged ``from_agent``,
``register`` with the echo agent's id and an ``invocation_url`` (must be refused). The
newest-connection-wins rule lets any key holder replace an agent over plain ``register``; the
fuzzer exercises that on its own decoy, not on the well-behaved agents.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from fuzz.harness import ECHO_AGENT, ECHO_TOOL, Master
from fuzz.hooks import DEAD_URL

ASKER = "fuzz-asker"
FUZZER = "fuzz-spoofer"
DECOY = "fuzz-decoy"
QUERY_TIMEOUT = 30.0


@dataclass
class WsOutcome:
    loop_ok: int = 0
    loop_failed: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    frames_sent: int = 0
    frames_by_kind: Counter[str] = field(default_factory=Counter)
    errors_by_code: Counter[str] = field(default_factory=Counter)
    fuzzer_closes: Counter[str] = field(default_factory=Counter)
    spoofs_accepted: list[str] = field(default_factory=list)


class _Shared:
    def __init__(self) -> None:
        self.calls_in_flight: list[str] = []
        self.stop = asyncio.Event()


async def _register(ws: ClientConnection, agent_id: str, role: str, tools: list[dict[str, Any]]) -> None:
    await ws.send(json.dumps({"type": "register", "agent_id": agent_id, "role": role, "tools": tools}))
    async with asyncio.timeout(10):
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("type") == "registered":
                return
            if frame.get("type") == "error":
                raise RuntimeError(f"{agent_id} could not register: {frame}")


async def _echo_agent(master: Master, shared: _Shared, outcome: WsOutcome, ready: asyncio.Event) -> None:
    tool = {
        "name": ECHO_TOOL,
        "description": "Echo the text",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    }
    async with connect(master.ws_url, additional_headers=master.headers, max_size=None) as ws:
        await _register(ws, ECHO_AGENT, "action", [tool])
        ready.set()
        try:
            while not shared.stop.is_set():
                try:
                    async with asyncio.timeout(0.5):
                        frame = json.loads(await ws.recv())
                except TimeoutError:
                    continue
                if frame.get("type") != "tool_call":
                    continue
                call_id = frame["call_id"]
                shared.calls_in_flight.append(call_id)
                await asyncio.sleep(0.05)  # leave the fuzzer a moment to spoof this call
                text = (frame.get("arguments") or {}).get("text", "")
                await ws.send(
                    json.dumps(
                        {"type": "tool_result", "call_id": call_id, "success": True, "result": {"echo": text}}
                    )
                )
                shared.calls_in_flight.remove(call_id)
        except ConnectionClosed as exc:
            outcome.dropped.append(f"{ECHO_AGENT}: closed {exc.rcvd.code if exc.rcvd else 'abnormally'}")


async def _query_loop(
    master: Master, shared: _Shared, outcome: WsOutcome, deadline: float, max_queries: int
) -> None:
    async with connect(master.ws_url, additional_headers=master.headers, max_size=None) as ws:
        await _register(ws, ASKER, "query", [])
        try:
            for n in range(max_queries):
                if time.monotonic() >= deadline:
                    break
                nonce = uuid.uuid4().hex
                query_id = f"loop-{n}"
                await ws.send(
                    json.dumps(
                        {
                            "type": "query",
                            "query_id": query_id,
                            "query": nonce,
                            "allowed_agent_ids": [ECHO_AGENT],
                        }
                    )
                )
                try:
                    async with asyncio.timeout(QUERY_TIMEOUT):
                        while True:
                            frame = json.loads(await ws.recv())
                            if frame.get("query_id") == query_id and frame.get("type") == "query_result":
                                break
                except TimeoutError:
                    outcome.loop_failed.append(f"{query_id}: no query_result within {QUERY_TIMEOUT:g} s")
                    continue
                if not frame.get("success") or nonce not in str(frame.get("answer")):
                    outcome.loop_failed.append(
                        f"{query_id}: {frame.get('error_code')} {str(frame.get('error') or frame.get('answer'))[:200]}"
                    )
                elif "SPOOFED" in str(frame.get("answer")):
                    outcome.spoofs_accepted.append(query_id)
                else:
                    outcome.loop_ok += 1
        except ConnectionClosed as exc:
            outcome.dropped.append(f"{ASKER}: closed {exc.rcvd.code if exc.rcvd else 'abnormally'}")


def _frames(rng: random.Random, shared: _Shared, max_bytes: int) -> tuple[str, str | bytes]:
    """One fuzz frame: (kind, payload)."""
    kind = rng.choice(
        [
            "malformed",
            "binary",
            "oversized",
            "nested",
            "nested_result",
            "wrong_type",
            "unknown",
            "spoof_result",
            "spoof_progress",
            "forged_peer",
            "end_unknown",
            "register_taken",
            "register_decoy",
            "query_junk",
            "progress_flood",
            "ping",
            "huge_tool",
        ]
    )
    call_id = rng.choice(shared.calls_in_flight) if shared.calls_in_flight else uuid.uuid4().hex
    depth = rng.choice([100, 199, 201, 1000, 50_000])
    payloads: dict[str, Any] = {
        "malformed": rng.choice(
            ["{", '{"type": ', "[1,2", "\x00\x01", '{"type": "ping",}', "null", '"str"', "1e999999"]
        ),
        "binary": bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))),
        "oversized": json.dumps({"type": "ping", "pad": "x" * (max_bytes + rng.randint(1, 1000))}),
        "nested": "[" * depth + "]" * depth,
        "nested_result": f'{{"type":"tool_result","call_id":"{call_id}","success":true,"result":'
        + "[" * depth
        + "]" * depth
        + "}",
        "wrong_type": json.dumps(
            rng.choice(
                [
                    {"type": "register", "agent_id": 123, "role": "action"},
                    {"type": "register", "agent_id": "x", "role": "boss"},
                    {"type": "query", "query_id": None, "query": 5},
                    {"type": "tool_result", "call_id": ["a"], "success": "yes"},
                    {"type": "tool_progress", "call_id": call_id, "progress": 7},
                    {"type": "peer_message", "session_id": 1, "content": "text"},
                ]
            )
        ),
        "unknown": json.dumps(
            {"type": rng.choice(["teleport", "registered", "tool_call", "pong", "error", ""]), "x": 1}
        ),
        "spoof_result": json.dumps(
            {"type": "tool_result", "call_id": call_id, "success": True, "result": {"echo": "SPOOFED"}}
        ),
        "spoof_progress": json.dumps(
            {"type": "tool_progress", "call_id": call_id, "message": "SPOOFED\nCRITICAL forged"}
        ),
        "forged_peer": json.dumps(
            {
                "type": "peer_message",
                "session_id": uuid.uuid4().hex,
                "to_agent": ECHO_AGENT,
                "from_agent": ECHO_AGENT,
                "content": {"x": 1},
            }
        ),
        "end_unknown": json.dumps(
            {"type": "collaboration_end", "session_id": uuid.uuid4().hex, "from_agent": ECHO_AGENT}
        ),
        "register_taken": json.dumps(
            {
                "type": "register",
                "agent_id": ECHO_AGENT,
                "role": "action",
                "tools": [{"name": ECHO_TOOL}],
                "invocation_url": DEAD_URL,
            }
        ),
        "register_decoy": json.dumps(
            {"type": "register", "agent_id": DECOY, "role": "action", "tools": [{"name": "t"}]}
        ),
        "query_junk": json.dumps(
            {
                "type": "query",
                "query_id": uuid.uuid4().hex,
                "query": "x",
                "allowed_agent_ids": ["nobody"],
                "orchestrator_model": rng.choice(["", "nope", None]),
            }
        ),
        "progress_flood": json.dumps(
            {"type": "tool_progress", "call_id": call_id, "message": "y\n" * rng.randint(1, 50_000)}
        ),
        "ping": json.dumps({"type": "ping"}),
        "huge_tool": json.dumps(
            {
                "type": "register",
                "agent_id": f"fuzz-huge-{rng.randint(0, 9)}",
                "role": "action",
                "tools": [{"name": "t", "description": "d" * 100_000}],
            }
        ),
    }
    return kind, payloads[kind]


async def _drain(ws: ClientConnection, outcome: WsOutcome) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(0.02):
            while True:
                frame = json.loads(await ws.recv())
                if frame.get("type") == "error":
                    outcome.errors_by_code[str(frame.get("code"))] += 1


async def _fuzzer(
    master: Master,
    shared: _Shared,
    outcome: WsOutcome,
    seed: int,
    deadline: float,
    max_frames: int,
    max_bytes: int,
) -> None:
    rng = random.Random(seed)
    ws: ClientConnection | None = None
    try:
        for _ in range(max_frames):
            if time.monotonic() >= deadline:
                break
            if ws is None:
                ws = await connect(master.ws_url, additional_headers=master.headers, max_size=None)
                if rng.random() < 0.5:  # half the connections register first
                    with contextlib.suppress(RuntimeError, ConnectionClosed, TimeoutError):
                        await _register(ws, f"{FUZZER}-{rng.randint(0, 3)}", "action", [{"name": "t"}])
            kind, payload = _frames(rng, shared, max_bytes)
            try:
                await ws.send(payload)
                outcome.frames_sent += 1
                outcome.frames_by_kind[kind] += 1
                await _drain(ws, outcome)
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else "abnormal"
                outcome.fuzzer_closes[f"{kind}:{code}"] += 1
                with contextlib.suppress(Exception):
                    await ws.close()
                ws = None
            await asyncio.sleep(0)
    finally:
        if ws is not None:
            await ws.close()


async def run_ws(
    master: Master,
    *,
    seed: int,
    duration: float,
    max_frames: int = 200_000,
    max_queries: int = 100_000,
    max_bytes: int = 1 << 20,
) -> WsOutcome:
    """Run the well-behaved loop and the fuzzer for ``duration`` seconds (bounded counts too)."""
    outcome = WsOutcome()
    shared = _Shared()
    ready = asyncio.Event()
    deadline = time.monotonic() + duration
    echo = asyncio.create_task(_echo_agent(master, shared, outcome, ready))
    try:
        async with asyncio.timeout(15):
            await ready.wait()
        await asyncio.gather(
            _query_loop(master, shared, outcome, deadline, max_queries),
            _fuzzer(master, shared, outcome, seed, deadline, max_frames, max_bytes),
        )
    finally:
        shared.stop.set()
        async with asyncio.timeout(10):
            await asyncio.gather(echo, return_exceptions=True)
    return outcome
