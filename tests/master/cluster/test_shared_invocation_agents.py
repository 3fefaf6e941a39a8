"""HTTP invocation agents with several masters: one registered or removed on one master is known,
offered and called, or gone, on the others without a restart or ``GET /refresh``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openagent.testing import ScriptedOpenAIServer
from tests.factories import MasterProcess, serve_app
from tests.master.cluster.test_two_masters import cluster_env, row, rows_until


def offered(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


async def test_an_invocation_agent_registered_on_one_master_is_offered_by_the_other_until_removed(
    llm: ScriptedOpenAIServer,
) -> None:
    calls: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def run(request: Request) -> JSONResponse:
        body = await request.json()
        await calls.put(body)
        async with httpx.AsyncClient(timeout=30) as back:  # answer at once through the callback
            await back.post(
                body["callback_url"], json={"call_id": body["call_id"], "success": True, "result": "ok"}
            )
        return JSONResponse({"accepted": True}, status_code=202)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    agent_app = Starlette(routes=[Route("/health", health), Route("/run", run, methods=["POST"])])
    with MasterProcess(cluster_env(llm)) as a, MasterProcess(cluster_env(llm)) as b:
        async with serve_app(agent_app) as agent_url, httpx.AsyncClient(timeout=30) as http:
            tool = {"name": "echo", "parameters": {"type": "object"}, "endpoint": "/run"}
            registered = await http.post(
                f"{a.base_url}/register",
                json={"agent_id": "shared-echo", "invocation_base_url": agent_url, "tools": [tool]},
            )
            assert registered.status_code == 200, registered.text
            try:
                listed = row(
                    await rows_until(b.base_url, lambda rows: row(rows, "shared-echo") is not None),
                    "shared-echo",
                )
                assert listed is not None and listed["connection_type"] == "invocation"

                # A query on B offers the agent's tool to the model, and B calls the agent.
                llm.add_tool_call("shared-echo__echo", {"text": "hi"})
                llm.add_text("Echoed.")
                answer = await http.post(f"{b.base_url}/query", json={"query": "echo hi"})
                assert answer.json()["success"] is True, answer.text
                assert "shared-echo__echo" in offered(llm.requests[0])
                async with asyncio.timeout(60):
                    call = await calls.get()
                assert call["arguments"] == {"text": "hi"} and b.base_url in call["callback_url"]
                assert json.loads(llm.requests[1]["messages"][-1]["content"]) == {"result": "ok"}
            finally:
                removed = await http.post(f"{a.base_url}/unregister", json={"agent_id": "shared-echo"})
            assert removed.status_code == 200, removed.text

            # Removed on A: gone on B, from the list and from what B's queries offer.
            await rows_until(b.base_url, lambda rows: row(rows, "shared-echo") is None)
            llm.add_text("Nothing to call.")
            answer = await http.post(f"{b.base_url}/query", json={"query": "echo again"})
            assert answer.json()["success"] is True, answer.text
            assert "shared-echo__echo" not in offered(llm.requests[-1])
