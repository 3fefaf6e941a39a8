"""API-key auth on HTTP and WebSocket, for every route of the app's own route table.

The routes are not listed here: they are read from the app, so a route added later is
covered without anyone remembering to add it. Only the routes named in ``PUBLIC`` and
``CALL_TOKEN`` may answer without the key.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import HTTPException, Request
from fastapi.routing import APIWebSocketRoute, iter_route_contexts
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from master.access import Permission, requires
from master.auth import BOOTSTRAP_ADMIN, Principal, Role, key_matches, presented_key, set_principal
from master.llm.model import ChatResult, FunctionChatModel
from tests.factories import InProcessMaster, RawPeer, in_process_master

KEY = "s3cret-key"
WRONG = {"Authorization": "Bearer nope"}
RIGHT = {"Authorization": f"Bearer {KEY}"}

PUBLIC = {
    "/health",
    "/ready",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
    "/openapi.json",
    "/",
    "/favicon.svg",
    "/favicon.ico",
}
"""Paths that answer without the key: liveness, readiness, the API docs pages and the document
they render (README, "API docs": the document is open; the routes it lists need the key), the
favicon, and
``/``, the redirect to the web UI's page when it is built (the page asks for the key)."""
CALL_TOKEN = {("POST", "/tool_callback"), ("POST", "/tool_progress"), ("GET", "/attachments/some-id")}
"""Routes for agents, authenticated by a per-call token instead of the API key (invocation
callbacks, the RAG agents' blob endpoint): nothing is done or shown without that token."""


def http_routes(app: Any) -> list[tuple[str, str]]:
    """(method, path) of every HTTP route of ``app``, path parameters filled in."""
    found = []
    for context in iter_route_contexts(app.routes):
        if isinstance(context.route, APIWebSocketRoute) or context.methods is None:
            continue
        path = re.sub(r"\{[^}]+\}", "some-id", context.path)
        found += [(method, path) for method in sorted(context.methods) if method != "HEAD"]
    return found


def websocket_paths(app: Any) -> list[str]:
    return [c.path for c in iter_route_contexts(app.routes) if isinstance(c.route, APIWebSocketRoute)]


@pytest.fixture
async def secured() -> AsyncIterator[InProcessMaster]:
    async with in_process_master(
        FunctionChatModel(lambda m, t: ChatResult("ok")), openagent_api_key=KEY
    ) as m:
        yield m


@pytest.fixture
async def http(secured: InProcessMaster) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=secured.base_url, timeout=30) as client:
        yield client


async def test_the_route_table_is_walked(secured: InProcessMaster) -> None:
    routes = http_routes(secured.app)
    assert ("POST", "/query") in routes and ("POST", "/internal/collaborations") in routes
    assert ("POST", "/register") in routes and ("GET", "/tool_progress/some-id") in routes
    assert websocket_paths(secured.app) == ["/ws"]


async def test_every_protected_route_needs_the_key(secured: InProcessMaster, http: httpx.AsyncClient) -> None:
    checked = []
    for method, path in http_routes(secured.app):
        if path in PUBLIC or (method, path) in CALL_TOKEN:
            continue
        for headers in ({}, WRONG):
            response = await http.request(method, path, json={}, headers=headers)
            assert response.status_code == 401, (method, path, headers, response.text)
            assert response.headers["www-authenticate"] == "Bearer"
        response = await http.request(method, path, json={}, headers=RIGHT)
        assert response.status_code != 401, (method, path, response.text)
        checked.append((method, path))
    assert len(checked) >= 10, checked


async def test_call_token_routes_refuse_without_the_call_token(
    secured: InProcessMaster, http: httpx.AsyncClient
) -> None:
    assert CALL_TOKEN <= set(http_routes(secured.app))
    body = {"call_id": "no-such-call", "success": True}
    for method, path in sorted(CALL_TOKEN):
        for headers in ({}, WRONG, RIGHT):  # the API key does not stand in for the token
            for url in (path, f"{path}?token=forged"):
                response = await http.request(method, url, json=body, headers=headers)
                assert 400 <= response.status_code < 500, (method, url, headers, response.text)
    # The invocation callbacks: the token is required (401), and a forged one knows no call (404).
    assert (await http.post("/tool_callback", json=body)).status_code == 401
    assert (await http.post("/tool_callback?token=forged", json=body, headers=RIGHT)).status_code == 404


async def test_public_routes_answer_without_the_key(
    secured: InProcessMaster, http: httpx.AsyncClient
) -> None:
    public = [(method, path) for method, path in http_routes(secured.app) if path in PUBLIC]
    assert ("GET", "/health") in public
    for method, path in public:
        # 200, or the redirect from / to the built web UI
        assert (await http.request(method, path)).status_code in (200, 307), path


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_api_docs_are_served_without_the_key(http: httpx.AsyncClient, page: str) -> None:
    response = await http.get(page)
    assert response.status_code == 200
    assert "text/html" in response.headers["content-type"]
    assert "/openapi.json" in response.text


async def test_openapi_document_is_open_and_declares_the_bearer_key(http: httpx.AsyncClient) -> None:
    response = await http.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    scheme = document["components"]["securitySchemes"]["OPENAGENT_API_KEY"]
    assert {k: v for k, v in scheme.items() if k != "description"} == {"type": "http", "scheme": "bearer"}
    assert document["paths"]["/agents"]["get"]["security"] == [{"OPENAGENT_API_KEY": []}]
    assert "security" not in document["paths"]["/health"]["get"]


@pytest.mark.parametrize(
    ("suffix", "headers"),
    [("", None), ("?token=bad", None), ("", WRONG), ("?token=", None)],
)
async def test_every_websocket_route_closes_1008_without_the_key(
    secured: InProcessMaster, suffix: str, headers: dict[str, str] | None
) -> None:
    for path in websocket_paths(secured.app):
        url = secured.base_url.replace("http", "ws", 1) + path + suffix
        async with connect(url, additional_headers=headers, open_timeout=30) as ws:
            with pytest.raises(ConnectionClosed) as info:
                async with asyncio.timeout(30):
                    await ws.send('{"type": "ping"}')  # an open hub would answer pong
                    await ws.recv()
        assert info.value.rcvd is not None and info.value.rcvd.code == 1008, path


@pytest.mark.parametrize("how", ["header", "query"])
async def test_websocket_with_key(secured: InProcessMaster, how: str) -> None:
    if how == "header":
        peer = await RawPeer.connect(secured.ws_url, additional_headers=RIGHT)
    else:
        peer = await RawPeer.connect(f"{secured.ws_url}?token={KEY}")
    try:
        await peer.register(f"auth-{how}")
    finally:
        await peer.close()


async def test_post_query_error_names_the_variable(http: httpx.AsyncClient) -> None:
    response = await http.post("/query", json={"query": "hi"})
    assert response.status_code == 401 and "OPENAGENT_API_KEY" in response.json()["detail"]


async def test_auth_off_when_key_unset() -> None:
    assert key_matches(None, None) and key_matches(None, "anything")
    async with in_process_master(FunctionChatModel(lambda m, t: ChatResult("ok"))) as m:
        async with httpx.AsyncClient(base_url=m.base_url, timeout=30) as http:
            assert (await http.get("/agents")).status_code == 200


async def test_401_comes_before_the_body_is_parsed() -> None:
    """Defect 15: without the key, every protected route answers 401 to an unparseable or invalid
    body (not 400/422). The routes are read from the app's route table."""
    import re

    from fastapi.routing import iter_route_contexts

    from master.app import create_app
    from master.deps import needs_api_key
    from master.settings import Settings

    app = create_app(Settings(openagent_api_key=KEY))
    protected = [route for route in iter_route_contexts(app.routes) if needs_api_key(route)]
    assert {"/query", "/register", "/internal/collaborations"} <= {r.path for r in protected}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://master") as http:
        for route in protected:
            path = re.sub(r"\{[^}]+\}", "some-id", route.path or "")
            for method in sorted((route.methods or set()) - {"HEAD"}):
                for body in (b"{not json", b"[" * 5000, b'{"unexpected": 1}'):
                    response = await http.request(
                        method, path, content=body, headers={"Content-Type": "application/json"}
                    )
                    assert response.status_code == 401, (method, path, body[:10], response.text)
                    assert response.headers["www-authenticate"] == "Bearer"
        assert (await http.get("/health")).status_code == 200


@pytest.mark.parametrize(
    ("kind", "headers", "query", "accepted"),
    [
        ("http", [(b"authorization", f"Bearer {KEY}".encode())], b"", True),
        ("http", [(b"authorization", f"bearer  {KEY} ".encode())], b"", True),
        (
            "http",
            [(b"authorization", b"Bearer nope"), (b"authorization", f"Bearer {KEY}".encode())],
            b"",
            False,
        ),
        ("http", [], f"token={KEY}".encode(), False),  # the query-string form is for WebSockets only
        ("http", [(b"x-api-key", KEY.encode())], b"", False),
        ("http", [(b"authorization", f"Basic {KEY}".encode())], b"", False),
        ("websocket", [(b"authorization", f"Bearer {KEY}".encode())], b"", True),
        ("websocket", [], f"token={KEY}".encode(), True),
        ("websocket", [(b"authorization", b"Basic x")], f"token={KEY}".encode(), True),
        ("websocket", [], b"token=", False),
        ("websocket", [], b"", False),
    ],
)
def test_the_accepted_forms_of_the_key(
    kind: str, headers: list[tuple[bytes, bytes]], query: bytes, accepted: bool
) -> None:
    """The one check (every route, /ws, the lean routes) accepts exactly these forms."""
    scope = {"type": kind, "headers": headers, "query_string": query}
    assert key_matches(KEY, presented_key(scope)) is accepted
    assert key_matches(None, presented_key(scope))  # no key set: everything passes


async def test_the_route_dependency_refuses_on_its_own() -> None:
    """A route's :func:`requires` dependency does not lean on the access middleware (which
    answers first): with no principal resolved it refuses 401, with a role short of the
    permission 403 naming the role needed."""
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/query",
        "headers": [],
        "query_string": b"",
    }
    check = requires(Permission.QUERY)
    with pytest.raises(HTTPException) as refused:
        await check(Request(scope))
    assert refused.value.status_code == 401
    set_principal(scope, Principal(key_id="k", name="wall screen", role=Role.VIEWER))
    with pytest.raises(HTTPException) as refused:
        await check(Request(scope))
    assert refused.value.status_code == 403
    assert "'client'" in str(refused.value.detail) and "wall screen" in str(refused.value.detail)
    set_principal(scope, BOOTSTRAP_ADMIN)
    await check(Request(scope))
