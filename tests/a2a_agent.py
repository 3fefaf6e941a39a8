"""An A2A agent written with the official ``a2a-sdk`` server, for the tests of A2A agents on the hub.

What it does depends on the message's text:

- ``fail`` → the task ``FAILED`` with the message "the exchange is closed";
- ``reject`` → ``REJECTED``; ``ask`` → ``INPUT_REQUIRED`` ("which currency?");
- ``hang`` → the task keeps ``WORKING`` until it is cancelled (:attr:`TestA2AAgent.cancelled`);
- anything else → a ``WORKING`` update "looking it up", then an artifact with the text
  ``echo: <text>`` and a data part ``{"n": 5, "skill": <skill_id>, "data": <the data part>}``.

Every request must carry ``X-Api-Key: <token>`` when a token is set (401 otherwise, the card too).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.factories import free_port, serve_app


@dataclass
class TestA2AAgent(AgentExecutor):
    """The executor and its record of what it was asked (see the module docstring)."""

    __test__ = False

    streaming: bool = True
    bindings: tuple[str, ...] = ("JSONRPC", "HTTP+JSON")
    token: str = ""
    name: str = "Currency Agent"
    skills: tuple[tuple[str, str], ...] = (("convert.currency", "Convert an amount between currencies"),)
    public_card: bool = False
    """Serve the card without the token (only the A2A endpoints need it)."""
    legacy: bool = False
    """An A2A 0.3 agent: a 0.3 card (``url``, ``preferredTransport``) and 0.3 JSON-RPC only."""
    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Each message received: text, data, metadata and the request's headers."""
    started: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when a ``hang`` task starts."""
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled_ids: list[str] = field(default_factory=list)

    def card(self) -> AgentCard:
        interfaces = {
            "JSONRPC": AgentInterface(
                url=f"{self.base_url}/rpc", protocol_binding="JSONRPC", protocol_version="1.0"
            ),
            "HTTP+JSON": AgentInterface(
                url=f"{self.base_url}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"
            ),
        }
        return AgentCard(
            name=self.name,
            description="Converts currencies (a test agent).",
            version="2.1.0",
            supported_interfaces=[interfaces[binding] for binding in self.bindings],
            capabilities=AgentCapabilities(streaming=self.streaming),
            default_input_modes=["text/plain", "application/json"],
            default_output_modes=["text/plain", "application/json"],
            skills=[
                AgentSkill(id=skill_id, name=skill_id, description=description, tags=["test"])
                for skill_id, description in self.skills
            ],
        )

    def app(self) -> Starlette:
        card = self.card()
        handler = DefaultRequestHandler(agent_executor=self, task_store=InMemoryTaskStore(), agent_card=card)
        routes = [
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, "/rpc"),
            *create_rest_routes(handler, path_prefix="/rest"),
        ]
        if self.legacy:
            routes = [
                Route("/.well-known/agent-card.json", self._legacy_card),
                *create_jsonrpc_routes(handler, "/rpc", enable_v0_3_compat=True),
            ]
        app = Starlette(routes=routes)
        if self.token:
            app.add_middleware(BaseHTTPMiddleware, dispatch=self._auth)
        return app

    async def _legacy_card(self, request: Request) -> JSONResponse:
        skills = [{"id": i, "name": i, "description": d, "tags": ["test"]} for i, d in self.skills]
        return JSONResponse(
            {
                "name": self.name,
                "description": "Converts currencies (a test agent, A2A 0.3).",
                "url": f"{self.base_url}/rpc",
                "preferredTransport": "JSONRPC",
                "protocolVersion": "0.3.0",
                "version": "0.3.1",
                "capabilities": {"streaming": self.streaming},
                "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"],
                "skills": skills,
            }
        )

    async def _auth(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        if self.public_card and request.url.path == "/.well-known/agent-card.json":
            return await call_next(request)
        if request.headers.get("x-api-key") != self.token:
            return JSONResponse({"error": "bad X-Api-Key"}, status_code=401)
        return await call_next(request)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None and context.task_id and context.context_id
        text = " ".join(get_text_parts(message.parts))
        data = get_data_parts(message.parts)
        metadata = {key: message.metadata[key] for key in message.metadata}
        self.requests.append(
            {
                "text": text,
                "data": data,
                "metadata": metadata,
                "headers": context.call_context.state.get("headers"),
            }
        )
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work(updater.new_agent_message([new_text_part("looking it up")]))
        if text == "hang":
            self.started.set()
            await asyncio.Event().wait()  # until the task is cancelled
        elif text == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("the exchange is closed")]))
        elif text == "reject":
            await updater.reject(updater.new_agent_message([new_text_part("not a currency question")]))
        elif text == "ask":
            await updater.requires_input(updater.new_agent_message([new_text_part("which currency?")]))
        else:
            skill = metadata.get("skill_id")
            await updater.add_artifact(
                [new_text_part(f"echo: {text}"), new_data_part({"n": 5, "skill": skill, "data": data})]
            )
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        self.cancelled_ids.append(context.task_id)
        self.cancelled.set()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


@contextlib.asynccontextmanager
async def serve_a2a_agent(agent: TestA2AAgent, port: int | None = None) -> AsyncIterator[TestA2AAgent]:
    """Serve ``agent`` with uvicorn on a loopback port in this event loop (its card names the port)."""
    port = port or free_port()
    agent.base_url = f"http://127.0.0.1:{port}"
    async with serve_app(agent.app(), port=port):
        yield agent
