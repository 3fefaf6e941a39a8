"""Roles and permissions, walked over the app's real route table and the protocol's frame types.

Nothing here lists routes: they are read from the app (and the frame types from
``protocol.Message``), so a new route or frame is covered, or fails, without anyone
remembering it. Each role gets a stored key (``POST /keys``); every request its role may not
make is refused 403 ``forbidden`` with an unparseable body, so before the body was read.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIWebSocketRoute, iter_route_contexts
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from master.access import Permission, permission_of
from master.access.permissions import ROLES_WITH
from master.app import create_app
from master.auth import Role
from master.gateway.frames import FRAME_PERMISSIONS, MASTER_FRAMES, frame_types
from master.llm.model import ChatResult, FunctionChatModel
from tests.factories import InProcessMaster, RawPeer, in_process_master, master_settings

KEY = "roles-bootstrap-key"
ADMIN = {"Authorization": f"Bearer {KEY}"}


def routes_of(app: Any) -> list[tuple[str, str, Permission | None]]:
    """(method, path with parameters filled in, permission) of every HTTP route of ``app``."""
    found = []
    for context in iter_route_contexts(app.routes):
        if isinstance(context.route, APIWebSocketRoute) or context.methods is None:
            continue
        path = re.sub(r"\{[^}]+\}", "some-id", context.path)
        found += [(m, path, permission_of(context)) for m in sorted(context.methods) if m != "HEAD"]
    return found


def test_every_route_declares_a_permission(tmp_path: Path) -> None:
    """Every route, mount and WebSocket of the app (the web UI's too) declares its permission."""
    (tmp_path / "index.html").write_text("<html></html>")
    app = create_app(master_settings(openagent_api_key=KEY, openagent_ui_dir=str(tmp_path)))
    contexts = list(iter_route_contexts(app.routes))
    missing = [f"{sorted(c.methods or [])} {c.path}" for c in contexts if permission_of(c) is None]
    assert missing == [], f"routes without a permission (declare one with master.deps.needs): {missing}"
    assert {c.path for c in contexts} >= {"/ui", "/ws", "/mcp", "/keys", "/whoami", "/query"}


def test_every_frame_type_is_declared() -> None:
    """Each frame of the protocol is either one a connection may send, with its permission, or the master's."""
    assert set(FRAME_PERMISSIONS) | MASTER_FRAMES == frame_types()
    assert not set(FRAME_PERMISSIONS) & MASTER_FRAMES


@pytest.fixture
async def master() -> AsyncIterator[InProcessMaster]:
    async with in_process_master(
        FunctionChatModel(lambda m, t: ChatResult("ok")), openagent_api_key=KEY
    ) as m:
        yield m


@pytest.fixture
async def http(master: InProcessMaster) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=60) as client:
        yield client


async def make_key(http: httpx.AsyncClient, role: str, **extra: Any) -> dict[str, str]:
    response = await http.post("/keys", json={"name": f"{role} key", "role": role, **extra}, headers=ADMIN)
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['secret']}"}


def error_code(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("error_code") if isinstance(body, dict) else None


@pytest.mark.parametrize("role", [Role.CLIENT, Role.AGENT, Role.VIEWER])
async def test_each_role_is_refused_what_it_may_not_do_before_the_body_is_read(
    master: InProcessMaster, http: httpx.AsyncClient, role: Role
) -> None:
    headers = {**await make_key(http, role.value, agent_ids=["*"]), "Content-Type": "application/json"}
    keys_before = [k["key_id"] for k in (await http.get("/keys", headers=ADMIN)).json()["keys"]]
    refused, allowed = [], []
    for method, path, permission in routes_of(master.app):
        assert permission is not None
        if role in ROLES_WITH[permission]:
            allowed.append((method, path))
            continue
        response = await http.request(method, path, content=b"{not json", headers=headers)
        assert response.status_code == 403, (role, method, path, response.text)
        assert error_code(response) == "forbidden", (method, path, response.text)
        needed = [r.value for r in ROLES_WITH[permission] if r is not Role.ADMIN]
        assert any(f"'{r}'" in response.text for r in needed or ["admin"]), response.text
        refused.append((method, path))
    # Nothing a refused request asked for happened (a client's POST /keys made no key).
    assert [k["key_id"] for k in (await http.get("/keys", headers=ADMIN)).json()["keys"]] == keys_before
    assert ("POST", "/keys") in refused and ("POST", "/save-agent") in refused
    assert ("GET", "/agents") in allowed and ("GET", "/whoami") in allowed
    if role is Role.CLIENT:
        assert ("POST", "/register") in refused and ("POST", "/query") in allowed
        assert ("POST", "/mcp") in allowed and ("POST", "/v1/chat/completions") in allowed
    else:
        assert ("POST", "/query") in refused and ("POST", "/mcp") in refused and ("POST", "/a2a") in refused
        assert ("POST", "/v1/chat/completions") in refused


async def test_allowed_routes_are_not_refused(master: InProcessMaster, http: httpx.AsyncClient) -> None:
    """What a role holds passes the check (any answer but 401 and 403 ``forbidden``)."""
    for role in (Role.CLIENT, Role.VIEWER):
        headers = await make_key(http, role.value)
        for method, path, permission in routes_of(master.app):
            if permission in (None, Permission.CALL_TOKEN) or role not in ROLES_WITH[permission]:
                continue
            response = await http.request(method, path, json={}, headers=headers)
            assert response.status_code != 401 and error_code(response) != "forbidden", (role, method, path)


async def test_the_openai_door_refuses_in_its_own_shape(http: httpx.AsyncClient) -> None:
    viewer = await make_key(http, "viewer")
    response = await http.post("/v1/chat/completions", content=b"{", headers=viewer)
    assert response.status_code == 403
    assert (
        response.json()["error"]["code"] == "forbidden" and "'client'" in response.json()["error"]["message"]
    )


async def test_the_lean_query_path_checks_the_role(http: httpx.AsyncClient) -> None:
    """``POST /query`` with a plain JSON body (the lean path): a viewer gets 403, a client its answer."""
    viewer, client = await make_key(http, "viewer"), await make_key(http, "client")
    refused = await http.post("/query", json={"query": "hi"}, headers=viewer)
    assert refused.status_code == 403 and refused.json()["error_code"] == "forbidden"
    answered = await http.post("/query", json={"query": "hi"}, headers=client)
    assert answered.status_code == 200 and answered.json()["answer"] == "ok"


async def test_whoami_names_the_key(http: httpx.AsyncClient) -> None:
    client = await make_key(http, "client", tenant="team-a")
    me = (await http.get("/whoami", headers=client)).json()
    assert (me["name"], me["role"], me["tenant"]) == ("client key", "client", "team-a")
    admin = (await http.get("/whoami", headers=ADMIN)).json()
    assert (admin["role"], admin["key_id"]) == ("admin", "bootstrap")


# ----------------------------------------------------------------------------------- WebSocket

FRAMES: dict[str, dict[str, Any]] = {
    "ping": {"type": "ping"},
    "register": {"type": "register", "agent_id": "weather-1", "role": "action", "tools": []},
    "query": {"type": "query", "query_id": "q1", "query": "hi"},
    "cancel": {"type": "cancel", "run_id": "run-1"},
    "tool_result": {"type": "tool_result", "call_id": "c1", "success": True},
    "tool_progress": {"type": "tool_progress", "call_id": "c1", "message": "half"},
    "peer_message": {"type": "peer_message", "session_id": "s1"},
    "collaboration_end": {"type": "collaboration_end", "session_id": "s1"},
}


def test_every_frame_has_a_sample() -> None:
    assert set(FRAMES) == set(FRAME_PERMISSIONS)


@pytest.mark.parametrize("role", [Role.CLIENT, Role.AGENT])
async def test_each_frame_a_role_may_not_send_is_forbidden(
    master: InProcessMaster, http: httpx.AsyncClient, role: Role
) -> None:
    headers = await make_key(http, role.value, agent_ids=["weather-*"])
    peer = await RawPeer.connect(master.ws_url, additional_headers=headers)
    try:
        for kind, frame in FRAMES.items():
            if role in ROLES_WITH[FRAME_PERMISSIONS[kind]]:
                continue
            await peer.send(frame)
            reply = await peer.recv()
            assert reply["type"] == "error" and reply["code"] == "forbidden", (kind, reply)
        assert master.services.registry.get("weather-1") is None or role is Role.AGENT
    finally:
        await peer.close()


async def test_a_client_key_queries_but_cannot_offer_tools(
    master: InProcessMaster, http: httpx.AsyncClient
) -> None:
    peer = await RawPeer.connect(master.ws_url, additional_headers=await make_key(http, "client"))
    try:
        await peer.send(FRAMES["register"])
        reply = await peer.recv()
        assert reply["code"] == "forbidden" and "'agent'" in reply["message"], reply
        assert master.services.registry.get("weather-1") is None
        await peer.register("asker", role="query")
        await peer.send(FRAMES["query"])
        result = await peer.recv()
        assert result["type"] == "query_result" and result["answer"] == "ok", result
    finally:
        await peer.close()


async def test_an_agent_key_connects_only_as_its_agent_ids(
    master: InProcessMaster, http: httpx.AsyncClient
) -> None:
    headers = await make_key(http, "agent", agent_ids=["weather-*"])
    peer = await RawPeer.connect(master.ws_url, additional_headers=headers)
    try:
        await peer.send({**FRAMES["register"], "agent_id": "calculator"})
        reply = await peer.recv()
        assert reply["code"] == "forbidden" and "weather-*" in reply["message"], reply
        await peer.send({**FRAMES["register"], "agent_id": "weather-1", "role": "query"})
        assert (await peer.recv())["code"] == "forbidden"
        await peer.register("weather-1")
        await peer.send(FRAMES["query"])
        assert (await peer.recv())["code"] == "forbidden"
    finally:
        await peer.close()
    # Over HTTP too: its ids only.
    tool = {"name": "add", "description": "Add.", "parameters": {"type": "object", "properties": {}}}
    body = {"agent_id": "calculator", "invocation_base_url": "http://127.0.0.1:9", "tools": [tool]}
    refused = await http.post("/register", json=body, headers=headers)
    assert refused.status_code == 403 and "weather-*" in refused.text
    refused = await http.post("/unregister", json={"agent_id": "calculator"}, headers=headers)
    assert refused.status_code == 403


async def test_a_viewer_cannot_connect(master: InProcessMaster, http: httpx.AsyncClient) -> None:
    headers = await make_key(http, "viewer")
    async with connect(master.ws_url, additional_headers=headers, open_timeout=30) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await ws.send('{"type": "ping"}')
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert "viewer" in closed.value.rcvd.reason
