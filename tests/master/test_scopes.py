"""Every handler reaches the tenant-owned stores with its caller's scope, walked over the real lists:
the app's route table, the protocol's frame types, the MCP door's methods and the A2A door's.

The stores of tenant-owned records (sessions, runs, approvals, attachments, collaborations, A2A
tasks, the agent directory) check the :class:`~master.auth.Scope` they are given in one place,
:class:`master.auth.TenantRecords`, which tells its watchers. A walk makes records of tenant ``b``
(a session, its run, an A2A task), then calls every handler with keys of tenant ``a``, naming
``b``'s records wherever a handler takes an id; every scope a store saw must be ``a``'s. A handler
that passes the master's own scope, or a default for every tenant that came back, fails the walk;
so does one that answers 500 (a store called without a scope raises ``TypeError``). A new route,
frame or method is walked without anyone remembering it, and one the walk cannot reach fails
until it has a sample.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import httpx2
import pytest
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from fastapi.routing import APIWebSocketRoute, iter_route_contexts
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from master.access import Permission, permission_of
from master.access.middleware import AccessMiddleware
from master.access.permissions import ROLES_WITH, permits
from master.agents.directory import AgentDirectory
from master.attachments.store import AttachmentStore
from master.auth import ANONYMOUS, SYSTEM, Principal, Role, Scope, TenantRecords, principal_of
from master.collaboration.store import CollabStore
from master.conversation.approvals import ApprovalStore
from master.conversation.store import SessionStore
from master.gateway.frames import FRAME_PERMISSIONS
from master.llm.model import ChatResult, FunctionChatModel
from master.runs.a2a_tasks import RedisTaskStore
from master.runs.responses import ResponseStore
from master.runs.store import RunStore
from tests.factories import InProcessMaster, RawPeer, in_process_master

KEY = "scopes-bootstrap-key"
ADMIN = {"Authorization": f"Bearer {KEY}"}
DEADLINE = 60
A = Scope.for_tenant("a")

Seen = list[tuple[str, str, Scope]]

SCOPED_READS: dict[type[TenantRecords], set[str]] = {
    SessionStore: {"load", "visible", "delete"},
    ApprovalStore: {"record", "get", "of_session", "pending"},
    RunStore: {"get", "checkpoint"},
    AttachmentStore: {"files", "index_states"},
    CollabStore: {"load", "for_parent"},
    RedisTaskStore: set(),  # the SDK's interface: the scope comes from the call's principal
    AgentDirectory: {"tool_targets", "rows", "known_ids"},
    ResponseStore: {"get", "delete"},
}
"""Each tenant-owned store and its reads, lists and deletes that take a scope."""


# ----------------------------------------------------------------------------------- the types


def test_every_tenant_owned_store_takes_a_required_scope() -> None:
    """The stores share the one base, and none of their scopes has a default (or is optional)."""
    for store, reads in SCOPED_READS.items():
        assert issubclass(store, TenantRecords), store
        for name, method in inspect.getmembers(store, inspect.isfunction):
            parameters = inspect.signature(method).parameters
            if name in reads:
                assert "scope" in parameters, f"{store.__name__}.{name} takes no scope"
            if "scope" in parameters:
                scope = parameters["scope"]
                assert scope.default is inspect.Parameter.empty, f"{store.__name__}.{name}: a default scope"
                assert scope.annotation == "Scope", f"{store.__name__}.{name}: {scope.annotation}"


async def test_a_store_refuses_anything_but_a_scope(redis_client: Any) -> None:
    store = SessionStore(redis_client, ttl_seconds=60)
    for wrong in (None, "a", ""):
        with pytest.raises(TypeError, match=r"SessionStore.load needs a Scope"):
            await store.load("s-1", wrong)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Scope.of"):
        Scope(object(), None)


def test_nobody_resolved_is_anonymous_never_the_administrator() -> None:
    assert principal_of({"type": "http", "headers": []}) is ANONYMOUS
    assert principal_of({"type": "http", "state": {"principal": "admin"}}) is ANONYMOUS
    assert not ANONYMOUS.is_admin
    assert [p for p in Permission if permits(ANONYMOUS, p)] == [Permission.OPEN, Permission.CALL_TOKEN]
    nothing = Scope.of(ANONYMOUS)
    assert not nothing.every_tenant and not nothing.sees(None) and not nothing.sees("default")
    assert Scope.of(SYSTEM).every_tenant
    tenant = Principal(key_id="k", name="n", role=Role.ADMIN, tenant="a", resolved=False)
    assert not Scope.of(tenant).every_tenant  # an unresolved "administrator" is not one


# ----------------------------------------------------------------------------------- the walk


@pytest.fixture
def seen() -> Iterator[Seen]:
    """Every scope a tenant-owned store is given while the test runs."""
    found: Seen = []

    def watch(store: TenantRecords, what: str, scope: Scope) -> None:
        found.append((type(store).__name__, what, scope))

    TenantRecords.watchers.append(watch)
    try:
        yield found
    finally:
        TenantRecords.watchers.remove(watch)


def not_a(found: Seen) -> list[tuple[str, str, Scope]]:
    return [entry for entry in found if entry[2] != A]


@pytest.fixture
async def master() -> AsyncIterator[InProcessMaster]:
    async with in_process_master(
        FunctionChatModel(lambda m, t: ChatResult("ok")), openagent_api_key=KEY
    ) as m:
        yield m


async def key(master: InProcessMaster, role: Role, tenant: str) -> dict[str, str]:
    keys = master.services.keys
    assert keys is not None
    agent_ids = ["*"] if role is Role.AGENT else []
    _, secret = await keys.create(name=f"{role} of {tenant}", role=role, tenant=tenant, agent_ids=agent_ids)
    return {"Authorization": f"Bearer {secret}"}


def a2a_send(text: str) -> dict[str, Any]:
    message = {"role": "user", "messageId": uuid.uuid4().hex, "parts": [{"kind": "text", "text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


async def b_records(master: InProcessMaster, http: httpx.AsyncClient) -> dict[str, str]:
    """A session, its run, an A2A task and a stored response (``/v1/responses``) of tenant ``b``."""
    b = await key(master, Role.CLIENT, "b")
    asked = await http.post("/query", json={"query": "b's secret"}, headers=b)
    assert asked.status_code == 200, asked.text
    task = (await http.post("/a2a", json=a2a_send("b's task"), headers=b)).json()["result"]
    response = await http.post("/v1/responses", json={"model": "openagent", "input": "b's secret"}, headers=b)
    assert response.status_code == 200, response.text
    return {
        "session_id": asked.json()["session_id"],
        "run_id": asked.json()["run_id"],
        "task_id": task["id"],
        "response_id": response.json()["id"],
    }


def routes_of(app: Any, ids: dict[str, str]) -> list[tuple[str, str, Permission | None]]:
    """(method, path with b's ids filled in, permission) of every HTTP route of ``app``."""
    found = []
    for context in iter_route_contexts(app.routes):
        if isinstance(context.route, APIWebSocketRoute) or context.methods is None:
            continue
        path = re.sub(r"\{([^}:]+)[^}]*\}", lambda m: ids.get(m.group(1)) or "some-id", context.path or "")
        found += [(m, path, permission_of(context)) for m in sorted(context.methods) if m != "HEAD"]
    return found


REACHED_BY_ROUTES = {
    ("SessionStore", "load"),
    ("SessionStore", "delete"),
    ("SessionStore", "visible"),
    ("ApprovalStore", "record"),
    ("ApprovalStore", "pending"),
    ("ApprovalStore", "of_session"),
    ("RunStore", "get"),
    ("AttachmentStore", "files"),
    ("AgentDirectory", "rows"),
    ("AgentDirectory", "tool_targets"),
    ("ResponseStore", "get"),
    ("ResponseStore", "delete"),
}
"""What the walk of the routes must reach (it proves the walk gets past the requests' checks; the
collaborations' routes are an administrator's, the A2A methods are walked below)."""


async def test_every_route_reaches_the_stores_with_its_callers_scope(
    master: InProcessMaster, seen: Seen
) -> None:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=DEADLINE) as http:
        ids = await b_records(master, http)
        own = await http.post("/query", json={"query": "a's"}, headers=await key(master, Role.CLIENT, "a"))
        variants = [  # b's session, a's own (its attachments), none (every session's approvals)
            {"session_id": ids["session_id"], "parent_session_id": ids["session_id"]},
            {"session_id": own.json()["session_id"]},
            {},
        ]
        body = {
            "query": "hi",
            "session_id": ids["session_id"],
            "parent_session_id": ids["session_id"],
            "agents": ["x", "y"],
            "task": "t",
            "decision": "approve",
            "agent_id": "some-id",
            "messages": [{"id": "m1", "role": "user", "content": "hi"}],
            "model": "openagent",
            "threadId": ids["session_id"],  # AG-UI (/ag-ui): b's session as the thread
            "runId": "r1",
            "input": "hi",
            "previous_response_id": ids["response_id"],
        }
        seen.clear()
        for role in (Role.CLIENT, Role.VIEWER, Role.AGENT):
            headers = await key(master, role, "a")
            for method, path, permission in routes_of(master.app, ids):
                if permission is None or role not in ROLES_WITH[permission] or path == "/mcp":
                    continue  # refused before any handler (test_roles); /mcp: walked by method below
                for params in variants if method == "GET" else variants[:1]:
                    response = await http.request(method, path, params=params, json=body, headers=headers)
                    assert not_a(seen) == [], (role, method, path)
                    assert response.status_code < 500, (role, method, path, response.text)
                    assert "b's secret" not in response.text, (role, method, path)
    reached = {(store, what) for store, what, _ in seen}
    assert REACHED_BY_ROUTES <= reached, REACHED_BY_ROUTES - reached


FRAMES: dict[str, dict[str, Any]] = {
    "ping": {"type": "ping"},
    "register": {"type": "register", "agent_id": "a-asker", "role": "query", "tools": []},
    "query": {"type": "query", "query_id": "q1", "query": "hi"},
    "cancel": {"type": "cancel", "run_id": "some-id"},
    "tool_result": {"type": "tool_result", "call_id": "c1", "success": True},
    "tool_progress": {"type": "tool_progress", "call_id": "c1", "message": "half"},
    "peer_message": {"type": "peer_message", "session_id": "s1"},
    "collaboration_end": {"type": "collaboration_end", "session_id": "s1"},
}


def test_every_frame_has_a_sample() -> None:
    assert set(FRAMES) == set(FRAME_PERMISSIONS)


async def until_reply(peer: RawPeer, wanted: set[str]) -> dict[str, Any]:
    async with asyncio.timeout(DEADLINE):
        while (frame := await peer.recv(DEADLINE))["type"] not in wanted:
            pass
    return frame


async def test_every_frame_reaches_the_stores_with_its_callers_scope(
    master: InProcessMaster, seen: Seen
) -> None:
    async with httpx.AsyncClient(base_url=master.base_url, timeout=DEADLINE) as http:
        ids = await b_records(master, http)
        seen.clear()
        for role in (Role.CLIENT, Role.AGENT):
            peer = await RawPeer.connect(master.ws_url, additional_headers=await key(master, role, "a"))
            try:
                as_role = "query" if role is Role.CLIENT else "action"
                await peer.send({**FRAMES["register"], "agent_id": f"a-{as_role}", "role": as_role})
                registered = await until_reply(peer, {"registered", "error"})
                assert registered["type"] == "registered", registered
                for kind, frame in FRAMES.items():
                    if role not in ROLES_WITH[FRAME_PERMISSIONS[kind]] or kind == "register":
                        continue
                    sample = {**frame, **({"session_id": ids["session_id"]} if "session_id" in frame else {})}
                    if kind == "query":
                        await peer.send({**sample, "session_id": ids["session_id"]})
                        reply = await until_reply(peer, {"query_result", "error"})
                        assert reply.get("error_code") == "unknown_session", reply
                        await peer.send(sample)  # a new session: its agents and its store
                        assert (await until_reply(peer, {"query_result"}))["answer"] == "ok"
                        continue
                    if kind == "cancel":  # b's run: unknown, as every run a does not see
                        await peer.send({**sample, "run_id": ids["run_id"]})
                        reply = await until_reply(peer, {"cancel_result", "error"})
                        assert (reply.get("code"), reply.get("ref")) == ("unknown_run", ids["run_id"]), reply
                        continue
                    await peer.send(sample)
                    await peer.send(FRAMES["ping"])
                    await until_reply(peer, {"pong"})
            finally:
                await peer.close()
            assert not_a(seen) == [], role
    reached = {(store, what) for store, what, _ in seen}
    assert {("SessionStore", "load"), ("AgentDirectory", "tool_targets"), ("RunStore", "get")} <= reached, (
        reached
    )


MCP_WALK = {"tools/list", "tools/call"}
"""The MCP methods walked below, with the official client."""
MCP_NO_STORE = {"ping", "initialize", "server/discover", "subscriptions/listen"}
"""MCP methods that reach no tenant-owned store (protocol housekeeping, the tool-list change feed)."""


async def test_every_mcp_method_reaches_the_stores_with_its_callers_scope(
    master: InProcessMaster, seen: Seen
) -> None:
    handled = set(master.services.mcp.server._request_handlers)
    assert handled <= MCP_WALK | MCP_NO_STORE, (
        f"walk these MCP methods too: {handled - MCP_WALK - MCP_NO_STORE}"
    )
    async with httpx.AsyncClient(base_url=master.base_url, timeout=DEADLINE) as http:
        ids = await b_records(master, http)
    seen.clear()
    async with (
        httpx2.AsyncClient(headers=await key(master, Role.CLIENT, "a"), timeout=DEADLINE) as mcp_http,
        Client(streamable_http_client(f"{master.base_url}/mcp", http_client=mcp_http)) as mcp,
    ):
        assert [tool.name for tool in (await mcp.list_tools()).tools] == ["ask"]
        asked = await mcp.call_tool("ask", {"query": "hi", "session_id": ids["session_id"]})
        assert asked.is_error and "unknown_session" in str(asked.content), asked
        assert not (await mcp.call_tool("ask", {"query": "hi"})).is_error
        with pytest.raises(MCPError, match="unknown tool"):
            await mcp.call_tool("b-agent__tool", {})
    assert not_a(seen) == []
    reached = {(store, what) for store, what, _ in seen}
    assert {("SessionStore", "load"), ("AgentDirectory", "tool_targets")} <= reached, reached


A2A_PARAMS: dict[str, Any] = {
    "SendMessage": lambda ids: {
        "message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]}
    },
    "SendStreamingMessage": lambda ids: {
        "message": {"role": "ROLE_USER", "messageId": "m2", "parts": [{"text": "hi"}]}
    },
    "GetTask": lambda ids: {"id": ids["task_id"]},
    "ListTasks": lambda ids: {},
    "CancelTask": lambda ids: {"id": ids["task_id"]},
    "SubscribeToTask": lambda ids: {"id": ids["task_id"]},
    "CreateTaskPushNotificationConfig": lambda ids: {"taskId": ids["task_id"], "url": "http://127.0.0.1:9"},
    "GetTaskPushNotificationConfig": lambda ids: {"taskId": ids["task_id"], "id": "c1"},
    "ListTaskPushNotificationConfigs": lambda ids: {"taskId": ids["task_id"]},
    "DeleteTaskPushNotificationConfig": lambda ids: {"taskId": ids["task_id"], "id": "c1"},
    "GetExtendedAgentCard": lambda ids: {},
}
"""A sample of every JSON-RPC method of the A2A SDK's dispatcher, naming b's task where it takes one."""


async def test_every_a2a_method_reaches_the_stores_with_its_callers_scope(
    master: InProcessMaster, seen: Seen
) -> None:
    assert set(A2A_PARAMS) == set(JsonRpcDispatcher.METHOD_TO_MODEL)
    async with httpx.AsyncClient(base_url=master.base_url, timeout=DEADLINE) as http:
        ids = await b_records(master, http)
        seen.clear()
        headers = {**await key(master, Role.CLIENT, "a"), "A2A-Version": "1.0"}
        for method, params in A2A_PARAMS.items():
            request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params(ids)}
            response = await http.post("/a2a", json=request, headers=headers)
            assert response.status_code < 500, (method, response.text)
            assert "b's task" not in response.text and "b's secret" not in response.text, method
            if method in ("GetTask", "CancelTask", "SubscribeToTask"):  # b's task is not there for a
                assert "error" in response.json() and "result" not in response.json(), (method, response.text)
            assert not_a(seen) == [], method
    reached = {(store, what) for store, what, _ in seen}
    assert {("RedisTaskStore", "get"), ("RedisTaskStore", "list")} <= reached, reached


# ------------------------------------------------------------------- a caller nothing resolved


ANSWERED_UNRESOLVED = {
    ("GET", "/.well-known/agent-card.json"),
    ("GET", "/a2a/.well-known/agent-card.json"),
    ("POST", "/a2a"),
    ("POST", "/a2a/"),
    ("POST", "/a2a/agents/some-id"),
    ("POST", "/a2a/agents/some-id/"),
}
"""Keyed routes that answer 2xx even so: the hub's own card (no tenant's data, at both its paths)
and the JSON-RPC endpoints (with or without the trailing slash), whose errors are 200s."""


async def test_a_caller_nothing_resolved_is_refused_on_every_route(
    master: InProcessMaster, seen: Seen, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every route served as if the access middleware forgot to resolve its caller (its check lets
    everything through and attaches no principal): a route that needs a key refuses, no store sees
    a scope but the anonymous one (which sees nothing), and nothing runs as the administrator."""
    async with httpx.AsyncClient(base_url=master.base_url, timeout=DEADLINE) as http:
        ids = await b_records(master, http)
        queries = master.services.metrics.queries.labels("completed")._value.get()

        async def forgets(self: AccessMiddleware, scope: Any) -> None:
            return None

        monkeypatch.setattr(AccessMiddleware, "_admit", forgets)
        seen.clear()
        body = {"query": "hi", "session_id": ids["session_id"], "agent_id": "some-id"}
        for method, path, permission in routes_of(master.app, ids):
            response = await http.request(method, path, json=body)
            assert response.status_code < 500, (method, path, response.text)
            if permission not in (Permission.OPEN, Permission.CALL_TOKEN) and response.status_code < 300:
                assert (method, path) in ANSWERED_UNRESOLVED, (method, path, response.text)
            assert "b's secret" not in response.text and "b's task" not in response.text, (method, path)
        sent = await http.post("/a2a", json=a2a_send("run this anyway"))
        assert "error" in sent.json() and "unauthorized" in sent.text, sent.text
    assert [entry for entry in seen if not entry[2].sees_nothing] == []
    assert master.services.metrics.queries.labels("completed")._value.get() == queries  # nothing ran
