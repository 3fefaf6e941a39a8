"""CPU per one-tool query of the OpenAI-compatible doors against ``POST /query``, in process.

The real app (lifespan, Redis, the lean paths) driven by ASGI calls (no HTTP client), with an LLM that
decides at once (:func:`bench.instant_llm.decide`) and an agent that answers at once (a function
behind the dispatcher): the figures are the master's own CPU per query, which a busy machine
skews far less than the served cases (``--cases openai``). The doors are measured alternately,
``--rounds`` times, ``--queries`` queries each at concurrency ``--concurrency``; the medians and
their ratios are printed (targets: the chat door ≤ 1.2× ``POST /query``; the Responses door,
``POST /v1/responses`` not stored, ≤ 1.2× the chat door).

    .venv/bin/python -m bench.openai_door --redis-url redis://127.0.0.1:6379/14
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from bench.echo_tool import TOOL_NAME
from bench.instant_llm import decide
from master.agents.registry import LiveAgent, compile_tools
from master.app import create_app
from master.llm.model import FunctionChatModel
from master.settings import Settings
from protocol import ToolCall, ToolResult, ToolSchema

AGENT = "bench-instant"
TOOL = ToolSchema(
    name=TOOL_NAME,
    description="Echo the text back",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)
BODIES: dict[str, tuple[str, dict[str, Any]]] = {
    "query": ("/query", {"query": "hello", "allowed_agent_ids": [AGENT]}),
    "openai": (
        "/v1/chat/completions",
        {"model": f"openagent/{AGENT}", "messages": [{"role": "user", "content": "hello"}]},
    ),
    "responses": ("/v1/responses", {"model": f"openagent/{AGENT}", "input": "hello", "store": False}),
}


def _instant_agent(services: Any) -> LiveAgent:
    dispatcher = services.dispatcher
    agent: LiveAgent

    async def send(frame: str) -> None:
        call = ToolCall.model_validate_json(frame)
        result = ToolResult(call_id=call.call_id, success=True, result={"echo": call.arguments.get("text")})
        asyncio.get_running_loop().call_soon(dispatcher.resolve, agent, result)

    async def close(code: int, reason: str) -> None:
        return None

    agent = LiveAgent(AGENT, "action", {}, compile_tools(AGENT, [TOOL]), send, close)
    return agent


async def _ask(app: Any, path: str, body: bytes) -> None:
    """One request straight into the app's ASGI callable: no HTTP client's CPU in the figures."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
        "app": app,
    }
    sent = False
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never disconnects
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    if status != [200]:
        raise RuntimeError(f"{path}: HTTP {status}")


async def _round(app: Any, door: str, queries: int, concurrency: int) -> float:
    """CPU milliseconds of this process per query."""
    path, body = BODIES[door]
    raw = json.dumps(body).encode()
    left = queries

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await _ask(app, path, raw)

    started = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - started) * 1000 / queries


async def main(args: argparse.Namespace) -> None:
    settings = Settings(_env_file=None, redis_url=args.redis_url, openagent_api_key="")  # type: ignore[call-arg]
    app = create_app(settings, llm=FunctionChatModel(decide))
    async with app.router.lifespan_context(app):
        services = app.state.services
        services.registry.add(_instant_agent(services))
        for door in BODIES:  # warm-up
            await _round(app, door, 200, args.concurrency)
        figures: dict[str, list[float]] = {door: [] for door in BODIES}
        for _ in range(args.rounds):
            for door in BODIES:
                figures[door].append(await _round(app, door, args.queries, args.concurrency))
    medians = {door: statistics.median(values) for door, values in figures.items()}
    for door, values in figures.items():
        shown = ", ".join(f"{value:.3f}" for value in values)
        print(f"{door:9} CPU ms/query: median {medians[door]:.3f} ({shown})")
    ratio = medians["openai"] / medians["query"]
    print(f"openai / query: {ratio:.2f} (target <= 1.2: {'PASS' if ratio <= 1.2 else 'FAIL'})")
    ratio = medians["responses"] / medians["openai"]
    print(f"responses / openai: {ratio:.2f} (target <= 1.2: {'PASS' if ratio <= 1.2 else 'FAIL'})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=4)
    asyncio.run(main(parser.parse_args()))
