"""The lean paths of ``POST /query`` and ``POST /tool_callback`` (:class:`master.asgi.LeanRoutes`):
the same answers as the full stack, and a middleware stack that cannot grow a layer they skip.

Each request is sent twice to one master, with the lean path on and off; the status, the
content type and the body (less the ids made per query) must be the same. The handler is
wrapped to record whether it answered or declined, so each case also checks which path ran.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from master.access.middleware import AccessMiddleware
from master.asgi import JsonDepthGuard, LeanRequest, LeanRoutes
from master.llm.model import ChatResult, FunctionChatModel
from master.routes.query import _json as query_json
from master.routes.query import send_json_answer
from protocol import QueryResponse
from tests.factories import InProcessMaster, in_process_master

KEY = "lean-key"
MAX_BODY = 4096


def built_stack(app: Any) -> list[Any]:
    """The app's ASGI layers, outermost first, down to (not including) the router."""
    layers = []
    layer = app.middleware_stack
    assert layer is not None, "the stack is built when the app first serves (its lifespan)"
    while layer is not app.router:
        layers.append(layer)
        layer = layer.app
    return layers


def lean_layer(app: Any) -> LeanRoutes:
    [layer] = [layer for layer in built_stack(app) if isinstance(layer, LeanRoutes)]
    return layer


class _Recorder:
    """Wraps the app's lean handler of ``POST path``: what it returned, request by request."""

    def __init__(self, app: Any, path: str = "/query") -> None:
        self.layer = lean_layer(app)
        self.key = ("POST", path)
        self.routes = dict(self.layer.routes)
        self.handler, permission = self.layer.routes[self.key]
        self.answered: list[bool] = []
        self.layer.routes[self.key] = (self._handle, permission)
        self.routes[self.key] = (self._handle, permission)

    async def _handle(self, services: Any, request: LeanRequest, send: Any) -> bool:
        answered = await self.handler(services, request, send)
        self.answered.append(answered)
        return answered

    def lean(self, on: bool) -> None:
        if on:
            self.layer.routes.update(self.routes)
        else:
            self.layer.routes.clear()


@pytest.fixture
async def master() -> AsyncIterator[InProcessMaster]:
    async with in_process_master(
        FunctionChatModel(lambda m, t: ChatResult("ok")),
        openagent_api_key=KEY,
        openagent_http_max_body_bytes=MAX_BODY,
    ) as m:
        yield m


def _comparable(response: httpx.Response) -> tuple[int, str, Any]:
    body: Any = response.text
    if response.headers.get("content-type") == "application/json":
        body = response.json()
        if isinstance(body, dict):
            body.pop("query_id", None)
            body.pop("run_id", None)
            if body.get("success"):
                body.pop("session_id", None)
    elif response.headers.get("content-type", "").startswith("text/event-stream"):
        body = [line.split(":", 1)[0] for line in response.text.splitlines()]  # the events' shape
    return response.status_code, response.headers.get("content-type", ""), body


async def _both(
    master: InProcessMaster, path: str = "/query", **request: Any
) -> tuple[tuple[int, str, Any], bool]:
    """The answer with the lean path on (and whether it answered), checked against the full stack's."""
    recorder = _Recorder(master.app, path.split("?")[0])
    headers = {"Authorization": f"Bearer {KEY}", **request.pop("headers", {})}
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60, headers=headers) as http:
        lean = await http.post(path, **request)
        recorder.lean(False)
        full = await http.post(path, **request)
    recorder.lean(True)
    assert _comparable(lean) == _comparable(full)
    return _comparable(lean), recorder.answered == [True]


async def _lean_serves(master: InProcessMaster) -> bool:
    """False once a test has set up OpenTelemetry for the process: FastAPI's request spans are on
    then, and the full stack serves every request (the comparisons still hold)."""
    recorder = _Recorder(master.app)
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
        response = await http.post("/query", json={"query": "hi"}, headers={"Authorization": f"Bearer {KEY}"})
    recorder.layer.routes.update(recorder.routes)
    assert response.status_code == 200
    return recorder.answered == [True]


async def test_a_plain_query_takes_the_lean_path(master: InProcessMaster) -> None:
    (status, kind, body), lean = await _both(master, json={"query": "hi"})
    assert lean == await _lean_serves(master) and status == 200 and kind == "application/json"
    assert body["success"] is True and body["answer"] == "ok"


async def test_a_body_sent_in_chunks_takes_the_lean_path(master: InProcessMaster) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"query": '
        yield b'"hi"}'

    headers = {"Content-Type": "application/json"}
    # A generator is consumed once: the full stack gets its own.
    serves = await _lean_serves(master)
    recorder = _Recorder(master.app)
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
        response = await http.post(
            "/query", content=chunks(), headers={**headers, "Authorization": f"Bearer {KEY}"}
        )
    assert response.status_code == 200 and response.json()["answer"] == "ok"
    assert recorder.answered == ([True] if serves else [])


async def test_a_rejected_query_is_answered_alike(master: InProcessMaster) -> None:
    (status, _, body), lean = await _both(master, json={"query": "hi", "session_id": "no-such-session"})
    assert lean == await _lean_serves(master) and status == 404 and body["error_code"] == "unknown_session"


@pytest.mark.parametrize(
    ("case", "request_kwargs", "status"),
    [
        ("not JSON", {"content": b"{nope", "headers": {"Content-Type": "application/json"}}, 422),
        ("no query field", {"json": {"question": "hi"}}, 422),
        (
            "a plain-text body",
            {"content": b'{"query": "hi"}', "headers": {"Content-Type": "text/plain"}},
            422,
        ),
        ("no content type", {"content": b'{"query": "hi"}'}, 422),
        ("a stream", {"json": {"query": "hi", "stream": True}}, 200),
        ("an SSE accept header", {"json": {"query": "hi"}, "headers": {"Accept": "text/event-stream"}}, 200),
        ("a body over the limit", {"json": {"query": "x" * (2 * MAX_BODY)}}, 413),
        ("no API key", {"json": {"query": "hi"}, "headers": {"Authorization": "Bearer wrong"}}, 401),
    ],
)
async def test_what_the_lean_path_declines_gets_the_full_stacks_answer(
    master: InProcessMaster, case: str, request_kwargs: dict[str, Any], status: int
) -> None:
    (got, _, _), lean = await _both(master, **request_kwargs)
    assert got == status, case
    assert not lean, f"{case}: the lean path answered"


async def test_an_oversized_declared_length_is_refused_before_the_body_is_read(
    master: InProcessMaster,
) -> None:
    body = json.dumps({"query": "x" * (2 * MAX_BODY)}).encode()
    (status, _, text), lean = await _both(
        master, content=body, headers={"Content-Type": "application/json", "Content-Length": str(len(body))}
    )
    assert status == 413 and not lean and "Too Large" in text


async def test_a_bug_answers_500_internal_error_like_the_full_stack(
    master: InProcessMaster, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    serves = await _lean_serves(master)
    monkeypatch.setattr(master.services.queries, "run", broken)
    (status, kind, body), lean = await _both(master, json={"query": "hi"})
    assert (status, kind, body["error_code"]) == (500, "application/json", "internal_error")
    assert lean == serves  # the query entry's fallback: an answer, not an exception


async def test_a_handler_that_raises_answers_a_plain_500(master: InProcessMaster) -> None:
    """Outside the lean routes, Starlette's ServerErrorMiddleware answers a bug as for any route."""

    async def broken(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("a bug")

    layer = lean_layer(master.app)
    saved = dict(layer.routes)
    serves = await _lean_serves(master)
    layer.routes[("POST", "/query")] = broken
    try:
        async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as http:
            response = await http.post(
                "/query", json={"query": "hi"}, headers={"Authorization": f"Bearer {KEY}"}
            )
    finally:
        layer.routes.update(saved)
    if serves:
        assert (response.status_code, response.text) == (500, "Internal Server Error")


def test_no_middleware_sits_between_the_lean_routes_and_the_app_unseen(master: InProcessMaster) -> None:
    """The lean routes skip every layer inside :class:`LeanRoutes`. This pins the stack: a new
    middleware must be added outside it (after it in ``create_app``) or be done by it too, and
    then this list changes on purpose."""
    assert [m.cls for m in master.app.user_middleware] == [LeanRoutes, AccessMiddleware, JsonDepthGuard]
    layers = built_stack(master.app)
    index = next(i for i, layer in enumerate(layers) if isinstance(layer, LeanRoutes))
    outside = [type(layer) for layer in layers[:index]]
    assert outside and all(cls.__module__.split(".")[0] in ("fastapi", "starlette") for cls in outside), (
        outside
    )
    assert type(layers[0]).__name__ == "ServerErrorMiddleware"  # a lean handler's bug is still a 500
    inside = [type(layer).__name__ for layer in layers[index + 1 :]]
    assert inside == [
        "AccessMiddleware",
        "JsonDepthGuard",  # the lean routes decline a body nested too deeply to it
        "ExceptionMiddleware",
        "AsyncExitStackMiddleware",
    ], inside


@pytest.mark.parametrize(
    ("case", "path", "body", "status", "lean"),
    [
        (
            "an unknown call",
            "/tool_callback?call_id=c1&token=t",
            {"call_id": "c1", "success": True},
            404,
            True,
        ),
        ("no token", "/tool_callback?call_id=c1", {"call_id": "c1", "success": True}, 401, False),
        ("an empty token", "/tool_callback?token=", {"call_id": "c1", "success": True}, 401, False),
        ("no success field", "/tool_callback?token=t", {"call_id": "c1"}, 422, False),
    ],
)
async def test_tool_callbacks_are_answered_alike(
    master: InProcessMaster, case: str, path: str, body: dict[str, Any], status: int, lean: bool
) -> None:
    """The accepted, duplicate and late callbacks of real calls: tests/master/agents/test_invocation.py."""
    (got, kind, text), answered = await _both(master, path, json=body)
    assert (got, answered) == (status, lean and await _lean_serves(master)), case
    if status == 404:
        assert kind == "application/json" and text == {
            "detail": "unknown or expired call 'c1', or invalid token",
            "error_code": "unknown_call",
        }


@pytest.mark.parametrize(
    "response",
    [
        QueryResponse(query_id="q", session_id="s", success=True, answer="é ok", steps=1),
        QueryResponse(query_id="q", success=False, error="no such session", error_code="unknown_session"),
        QueryResponse(query_id="q", success=False, error="stopping", error_code="draining"),
    ],
    ids=["answered", "refused", "draining"],
)
async def test_the_lean_json_answer_is_the_routes_byte_for_byte(response: QueryResponse) -> None:
    """The lean ``POST /query`` sends its answer without building the Starlette response the
    route returns: the same status, headers (``Retry-After`` when draining) and body."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await send_json_answer(send, response)
    route = query_json(response)
    assert sent == [
        {"type": "http.response.start", "status": route.status_code, "headers": route.raw_headers},
        {"type": "http.response.body", "body": route.body},
    ]
