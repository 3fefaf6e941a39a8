"""The A2A door: the hub and each of its agents as A2A agents, with the official ``a2a-sdk`` server.

One :class:`~a2a.server.request_handlers.DefaultRequestHandler` serves every endpoint; the
endpoint's scope (an agent id, or ``""`` for the hub) rides in the call context
(:data:`~master.runs.a2a_tasks.SCOPE_KEY`), so that the executor offers that agent only and the
task store keeps each endpoint's tasks apart. The SDK's JSON-RPC and HTTP+JSON (REST) routes are
made twice, under ``/a2a`` and under ``/a2a/agents/{agent_id}``, with its 0.3 compatibility on
(a request without the ``A2A-Version`` header is 0.3; 0.3 method names and ``/v1/`` REST paths
are served too).

The app declares the routes when it is created (:func:`route_specs`, the SDK's own table) and
this door, built in the lifespan, answers them (:meth:`A2ADoor.endpoint`). Auth is the master's:
the routes are protected like every other (the early auth middleware), the cards too unless
``OPENAGENT_A2A_PUBLIC_CARDS`` is on.

Before the SDK, the door refuses what its parser would let through: a body that is not JSON
(``ContentTypeNotSupportedError``, 415 on HTTP+JSON as the binding says, where the SDK answers
400) and a ``ListTasks`` whose ``status`` names no task state (the SDK drops an unknown enum
value, which would list every task). The cards carry cache headers (:class:`_CardCache`).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable
from email.utils import formatdate
from typing import Any, cast

from a2a.server.agent_execution import SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.id_generator import IDGenerator, IDGeneratorContext
from a2a.server.request_handlers import DefaultRequestHandler, RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.types.a2a_pb2 import AgentCard, CancelTaskRequest, Message, SendMessageRequest, Task, TaskState
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from master.agents.directory import AgentDirectory
from master.auth import Principal, Scope, principal_of
from master.doors.a2a import cancels
from master.doors.a2a.cards import AGENTS_PATH, CARD_PATH, HUB_CARD_PATHS, HUB_PATH, agent_card, hub_card
from master.doors.a2a.executor import HubExecutor
from master.doors.a2a.logs import logged, quiet_sdk
from master.doors.a2a.updates import check_parts
from master.query.approvals import ApprovalDesk
from master.query.entry import OfferedTool, QueryEntry
from master.runs.a2a_tasks import (
    PRINCIPAL_KEY,
    SCOPE_KEY,
    STREAMING_KEY,
    RedisEventStream,
    RedisTaskStore,
    principal_of_call,
    scope_of,
)
from protocol import ErrorCode

Endpoint = Callable[[Request], Awaitable[Response]]

PREFIXES = (HUB_PATH, f"{AGENTS_PATH}/{{agent_id}}")
"""The hub's endpoint, then every agent's."""
CARD_ROUTES = (*HUB_CARD_PATHS, f"{AGENTS_PATH}/{{agent_id}}{CARD_PATH}")
"""The hub's card (at the root and under ``/a2a``), then every agent's."""
CARD_MAX_AGE_SECONDS = 60
"""How long a client may keep a card without asking again (``Cache-Control: max-age``): an
agent's tools change when it reconnects."""


class _ScopedContext(DefaultServerCallContextBuilder):
    """The SDK's call context, plus the endpoint's scope (its ``{agent_id}``, or the hub) and who
    sent the request (its tenant owns the tasks it creates)."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[SCOPE_KEY] = request.path_params.get("agent_id", "")
        context.state[PRINCIPAL_KEY] = principal_of(request.scope)
        return context


class _NewTaskIds(IDGenerator):
    """The SDK's task ids (UUIDs), each announced to the store as new (one Redis read instead of three)."""

    def __init__(self, store: RedisTaskStore) -> None:
        self._store = store

    def generate(self, context: IDGeneratorContext) -> str:
        task_id = str(uuid.uuid4())
        self._store.expect_new(task_id)
        return task_id


class _ScopedHandler(DefaultRequestHandler):
    """The SDK's handler, refusing a message to an agent the hub does not know, and decisions on a
    task that waits for approvals that cannot be taken (before the task runs: it stays as it is)."""

    def __init__(
        self, agents: AgentDirectory, executor: HubExecutor, entry: QueryEntry, **kwargs: Any
    ) -> None:
        super().__init__(agent_executor=executor, **kwargs)
        self._agents = agents
        self._executor = executor
        self._entry = entry
        self._store: RedisTaskStore = kwargs["task_store"]

    def _check(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        check_parts(params.message)
        scope = scope_of(context)
        if scope and not self._agents.known_ids(Scope.of(principal_of_call(context)), [scope]):
            raise InvalidParamsError(
                message=f"unknown agent {scope!r}: no agent with that id is connected to the hub",
                data={"error_code": ErrorCode.UNKNOWN_AGENT.value},
            )

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """``CancelTask`` through the one cancel of every door (:mod:`master.doors.a2a.cancels`)."""
        stored = await self._versioned_store.get(params.id, context)
        principal = principal_of_call(context)
        state = stored.task.status.state if stored is not None else None
        if stored is not None and state == TaskState.TASK_STATE_WORKING:
            if await cancels.cancel_run(self._entry, stored.task, principal):
                ended = await cancels.ended(self._store, params.id, context)
                if ended is not None:
                    return ended
        task: Task | None = await super().on_cancel_task(params, context)
        if stored is not None and state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await cancels.cancel_run(self._entry, stored.task, principal)
        return task

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        self._check(params, context)
        await self._executor.check_decisions(params.message, context)
        context.state[STREAMING_KEY] = False
        result: Message | Task = await super().on_message_send(params, context)
        return result

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        self._check(params, context)
        await self._executor.check_decisions(params.message, context)
        context.state[STREAMING_KEY] = True
        async for event in super().on_message_send_stream(params, context):
            yield event


def _sdk_routes(handler: RequestHandler) -> list[Route]:
    """The SDK's routes under both prefixes: JSON-RPC, HTTP+JSON, both with the 0.3 compatibility."""
    builder = _ScopedContext()
    routes: list[Route] = []
    for prefix in PREFIXES:
        routes += create_jsonrpc_routes(handler, prefix, context_builder=builder, enable_v0_3_compat=True)
        # The SDK also mounts its routes under /{tenant}; the hub has no tenants.
        routes += [
            route
            for route in create_rest_routes(
                handler, context_builder=builder, enable_v0_3_compat=True, path_prefix=prefix
            )
            if isinstance(route, Route)
        ]
    return routes


def route_specs() -> list[tuple[str, frozenset[str]]]:
    """``(path, methods)`` of every A2A route but the cards, in the SDK's order (the app declares them)."""
    unbuilt = cast(RequestHandler, object())  # the routes' paths only: no request reaches it
    return [(route.path, frozenset(route.methods or ())) for route in _sdk_routes(unbuilt)]


class A2ADoor:
    """The hub's A2A endpoints and cards (module docstring)."""

    def __init__(
        self,
        entry: QueryEntry,
        agents: AgentDirectory,
        store: RedisTaskStore,
        events: RedisEventStream,
        *,
        approvals: ApprovalDesk | None = None,
        public_cards: bool = False,
    ) -> None:
        """``store`` and ``events``: the tasks in the master's Redis and their changes for the
        other masters (:mod:`master.runs.a2a_tasks`, built by the lifespan); ``approvals``: where a message on a task that waits for approvals decides them (and whose
        resumed runs move such a task on); ``public_cards``: the cards need no key (they may then be
        cached by shared caches)."""
        self.entry = entry
        self.agents = agents
        self.store = store
        self.events = events
        self.executor = HubExecutor(entry, self.store, approvals)
        if approvals is not None:
            approvals.listeners.append(self.executor.run_resumed)
        self.handler = _ScopedHandler(
            agents,
            self.executor,
            entry,
            task_store=self.store,
            event_stream=self.events,
            request_context_builder=SimpleRequestContextBuilder(task_id_generator=_NewTaskIds(self.store)),
            agent_card=hub_card("http://localhost"),  # the handler reads its capabilities and modes only
            validate_input_modes=True,  # a part of a media type the cards do not name: ContentTypeNotSupported
        )
        self._cards = _CardCache(public=public_cards)
        self._watch: asyncio.Task[None] | None = None
        self._endpoints: dict[tuple[str, str], Endpoint] = {}
        quiet_sdk()  # a client's mistake is one WARNING of this door's, not the SDK's tracebacks
        for route in _sdk_routes(self.handler):
            endpoint = route.endpoint
            if route.path.endswith(_V03_STREAMS):
                endpoint = _eager(endpoint)
            if route.path in PREFIXES:
                endpoint = _jsonrpc_checked(endpoint)
            elif "POST" in (route.methods or ()):
                endpoint = _rest_checked(endpoint)
            elif route.path.endswith("/tasks"):
                endpoint = _listing_checked(endpoint)
            endpoint = logged(endpoint, route.path)
            for method in route.methods or ():
                self._endpoints[(route.path, method)] = endpoint

    def endpoint(self, path: str, method: str) -> Endpoint:
        """The SDK endpoint of the route declared as ``path`` (see :func:`route_specs`)."""
        return self._endpoints[(path, method)]

    def tools(self, agent_id: str, principal: Principal) -> list[OfferedTool] | None:
        """The tools of ``agent_id`` wherever it is connected; ``None`` when the hub does not know
        it, or it serves another tenant than ``principal``'s."""
        if not self.agents.known_ids(Scope.of(principal), [agent_id]):
            return None
        return self.entry.offered_tools([agent_id], principal=principal)

    async def card(self, request: Request) -> Response:
        """``GET`` a card: the hub's, or ``{agent_id}``'s (404 when the hub does not know it)."""
        base = str(request.base_url)
        agent_id = request.path_params.get("agent_id")
        if agent_id is None:
            return self._cards.respond(request, hub_card(base))
        tools = self.tools(agent_id, principal_of(request.scope))
        if tools is None:
            return JSONResponse(
                {
                    "detail": f"unknown agent {agent_id!r}: no agent with that id is connected to the hub",
                    "error_code": ErrorCode.UNKNOWN_AGENT.value,
                },
                status_code=404,
            )
        return self._cards.respond(request, agent_card(base, agent_id, tools))

    def start(self) -> None:
        """Follow the cancellations other masters write (:meth:`RedisEventStream.watch_cancels`)."""
        self._watch = asyncio.create_task(
            self.events.watch_cancels(self.executor.abandon), name="a2a-cancels"
        )

    async def aclose(self) -> None:
        """Stop following cancellations and the tasks still running (the master stops)."""
        if self._watch is not None:
            # Cancelled until it is done: redis-py can swallow a cancellation that lands while its
            # pubsub connection is being set up, which would leave a single cancel() waiting forever.
            while not self._watch.done():
                self._watch.cancel()
                await asyncio.wait({self._watch}, timeout=0.5)
            await asyncio.gather(self._watch, return_exceptions=True)
        await self.handler.aclose()


_V03_STREAMS = ("/v1/message:stream", "/v1/tasks/{id}:subscribe")
"""The SDK's 0.3 REST streams, which start their SSE response before the handler has run."""


def _eager(endpoint: Endpoint) -> Endpoint:
    """Run a 0.3 REST stream up to its first event before answering, so that a refused request
    (invalid params, unknown task...) gets its JSON error, not a broken stream (as the SDK's
    1.0 REST streams do)."""

    async def eager(request: Request) -> Response:
        response = await endpoint(request)
        body = getattr(response, "body_iterator", None)
        if body is None or not inspect.isasyncgen(body):
            return response
        try:
            first = await anext(body)
        except StopAsyncIteration:
            return response
        except Exception as exc:  # the SDK's own mapping of its errors (A2AError: 4xx; else 500)
            payload = build_rest_error_payload(exc)
            return JSONResponse(payload, status_code=int(payload["error"]["code"]))

        async def chained() -> AsyncGenerator[Any, None]:
            yield first
            async for item in body:
                yield item

        response.body_iterator = chained()  # type: ignore[attr-defined]
        return response

    return eager


# Refusals before the SDK parses a request: what its parser lets through.

_JSON_TYPES = ("application/json", "application/a2a+json")
_LIST_TASKS_METHODS = frozenset({"ListTasks", "tasks/list"})


def _json_content(request: Request) -> bool:
    """``True`` when the request has no Content-Type or a JSON one."""
    content_type = request.headers.get("content-type")
    if content_type is None:
        return True
    media_type = content_type.partition(";")[0].strip().lower()
    return media_type in _JSON_TYPES or media_type.endswith("+json")


def _content_type_error(request: Request) -> ContentTypeNotSupportedError:
    return ContentTypeNotSupportedError(
        message=(
            f"unsupported Content-Type {request.headers.get('content-type')!r}: "
            "send the request as application/json"
        )
    )


def _status_error(status: object) -> InvalidParamsError | None:
    """The error for a ``ListTasks`` ``status`` filter that names no task state (the SDK's parser
    would drop it, and list every task), else ``None``."""
    if status is None or status == "":
        return None
    if isinstance(status, str) and (status in TaskState.keys() or status.isdigit()):
        status = TaskState.Value(status) if not status.isdigit() else int(status)
    if isinstance(status, int) and not isinstance(status, bool) and status in TaskState.values():
        return None
    return InvalidParamsError(
        message=f"unknown task status {status!r}: one of {', '.join(TaskState.keys()[1:])}"
    )


def _jsonrpc_error(request_id: object, error: A2AError) -> JSONResponse:
    return JSONResponse(
        {
            "jsonrpc": "2.0",
            "id": request_id if isinstance(request_id, str | int) else None,
            "error": {"code": JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603), "message": error.message},
        }
    )


def _rest_error(error: A2AError) -> JSONResponse:
    payload = build_rest_error_payload(error)
    status = (
        _UNSUPPORTED_MEDIA_TYPE
        if isinstance(error, ContentTypeNotSupportedError)
        else payload["error"]["code"]
    )
    payload["error"]["code"] = status
    return JSONResponse(payload, status_code=int(status))


_UNSUPPORTED_MEDIA_TYPE = 415
"""The HTTP+JSON binding's status of ``ContentTypeNotSupportedError`` (the SDK answers 400)."""
_CONTENT_TYPE_REASON = b'"CONTENT_TYPE_NOT_SUPPORTED"'


def _jsonrpc_checked(endpoint: Endpoint) -> Endpoint:
    """A JSON-RPC endpoint that refuses a body that is not JSON (``ContentTypeNotSupportedError``)
    and a ``ListTasks`` whose ``status`` names no task state (``InvalidParamsError``). The body is
    parsed once: the SDK reads the request's cached JSON."""

    async def checked(request: Request) -> Response:
        if not _json_content(request):
            return _jsonrpc_error(None, _content_type_error(request))
        try:
            body = await request.json()
        except ValueError:
            return await endpoint(request)  # the SDK's parse error
        if isinstance(body, dict) and body.get("method") in _LIST_TASKS_METHODS:
            params = body.get("params")
            error = _status_error(params.get("status")) if isinstance(params, dict) else None
            if error is not None:
                return _jsonrpc_error(body.get("id"), error)
        return await endpoint(request)

    return checked


def _rest_checked(endpoint: Endpoint) -> Endpoint:
    """An HTTP+JSON ``POST`` that refuses a body that is not JSON (415, ``ContentTypeNotSupportedError``),
    and answers 415 to a part of a media type the hub does not take."""

    async def checked(request: Request) -> Response:
        if not _json_content(request):
            return _rest_error(_content_type_error(request))
        response = await endpoint(request)
        body = getattr(response, "body", b"")
        if response.status_code == 400 and isinstance(body, bytes) and _CONTENT_TYPE_REASON in body:
            # The SDK's refusal of a part's media type: 415, as the binding says.
            payload = json.loads(body)
            payload["error"]["code"] = _UNSUPPORTED_MEDIA_TYPE
            return JSONResponse(payload, status_code=_UNSUPPORTED_MEDIA_TYPE)
        return response

    return checked


def _listing_checked(endpoint: Endpoint) -> Endpoint:
    """The HTTP+JSON ``ListTasks``, refusing a ``status`` that names no task state (400)."""

    async def checked(request: Request) -> Response:
        error = _status_error(request.query_params.get("status"))
        return _rest_error(error) if error is not None else await endpoint(request)

    return checked


class _CardCache:
    """A card's answer with its cache headers: ``ETag`` (the card's hash), ``Last-Modified`` (when
    this master first served that version of the card), ``Cache-Control``; a 304 to a matching
    ``If-None-Match``. Remembers when it first served each version (a bounded number, the oldest
    forgotten first)."""

    _LIMIT = 4096

    def __init__(self, *, public: bool) -> None:
        self._first_served: OrderedDict[str, str] = OrderedDict()
        visibility = "public" if public else "private"
        self._cache_control = f"{visibility}, max-age={CARD_MAX_AGE_SECONDS}"

    def respond(self, request: Request, card: AgentCard) -> Response:
        body = json.dumps(agent_card_to_dict(card), separators=(",", ":"), ensure_ascii=False).encode()
        etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
        modified = self._first_served.get(etag)
        if modified is None:
            modified = self._first_served[etag] = formatdate(time.time(), usegmt=True)
            while len(self._first_served) > self._LIMIT:
                self._first_served.popitem(last=False)
        self._first_served.move_to_end(etag)
        headers = {
            "ETag": etag,
            "Last-Modified": modified,
            "Cache-Control": self._cache_control,
            "Vary": "Authorization",
        }
        if _matches(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)


def _matches(if_none_match: str | None, etag: str) -> bool:
    """``If-None-Match`` names ``etag`` (weakly compared, as RFC 9110 says for it) or is ``*``."""
    if not if_none_match:
        return False
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag in tags
