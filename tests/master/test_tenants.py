"""Tenants through the real app: a real master (lifespan, Redis, uvicorn on loopback), the
scripted LLM, an administrator's key (``OPENAGENT_API_KEY``) and stored keys of tenants ``a``,
``b`` and ``c`` (a ``client`` and an ``agent`` key each, made with the key store as ``POST
/keys`` makes them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from websockets.exceptions import ConnectionClosed

from master.agents.url_policy import AgentUrlPolicy
from master.auth import SYSTEM, Principal, Role, Scope
from master.llm.model import ChatResult, FunctionChatModel
from master.query.entry import ToolRefused
from master.storage.redis_keys import agent_owner_key
from openagent.client import AgentClient
from openagent.config import ClientConfig
from openagent.errors import AgentReplacedError
from openagent.testing import ScriptedOpenAIServer
from protocol import REPLACED_BY_ANOTHER_KEY, Register, ToolSchema
from tests.factories import InProcessMaster, RawPeer, in_process_master

DEADLINE = 60
ADMIN_KEY = "tenants-admin-key"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}

_SECRETS: dict[tuple[str, str], str] = {}
"""(tenant, role) -> the secret of the key the running master made for it."""


async def make_keys(master: InProcessMaster) -> None:
    """A ``client`` and an ``agent`` key (any agent id) for tenants a, b and c, and an ``admin``
    key of tenant a."""
    store = master.services.keys
    assert store is not None
    _SECRETS.clear()
    wanted = [(t, r) for t in ("a", "b", "c") for r in (Role.CLIENT, Role.AGENT)] + [("a", Role.ADMIN)]
    for tenant, role in wanted:
        agent_ids = ["*"] if role is Role.AGENT else []
        _, secret = await store.create(
            name=f"{role} of {tenant}", role=role, tenant=tenant, agent_ids=agent_ids
        )
        _SECRETS[(tenant, str(role))] = secret


def as_tenant(tenant: str, role: str = "client") -> dict[str, str]:
    """The headers of the key of ``tenant`` with ``role``."""
    return {"Authorization": f"Bearer {_SECRETS[(tenant, role)]}"}


@contextlib.asynccontextmanager
async def keyed_master(llm: Any = None, **settings: Any) -> AsyncIterator[InProcessMaster]:
    async with in_process_master(llm, openagent_api_key=ADMIN_KEY, **settings) as master:
        await make_keys(master)
        yield master


GATED = {
    "name": "wire",
    "description": "Send money",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
    "requires_approval": True,
}


def tool(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"The {name} tool",
        "parameters": {"type": "object", "properties": {}},
    }


@pytest.fixture
async def hub(llm: ScriptedOpenAIServer) -> AsyncIterator[InProcessMaster]:
    async with keyed_master(openai_base_url=llm.base_url, openai_api_key="scripted") as master:
        yield master


def http(master: InProcessMaster, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    """A client with ``headers`` (an administrator's key by default)."""
    return httpx.AsyncClient(base_url=master.base_url, headers=headers or ADMIN, timeout=DEADLINE)


async def ask(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await client.post("/query", json={"query": "hi", **body})


async def until(condition: Any, what: str) -> None:
    async with asyncio.timeout(DEADLINE):
        while not condition():
            await asyncio.sleep(0.01)


def sse_result(text: str) -> dict[str, Any]:
    """The ``query_result`` event of a ``POST /query`` stream."""
    blocks = [block.split("\n", 1) for block in text.strip().split("\n\n")]
    [data] = [rest for head, rest in blocks if head == "event: query_result"]
    result: dict[str, Any] = json.loads(data.removeprefix("data: "))
    return result


def a2a_send(text: str, context_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": text}],
    }
    if context_id is not None:
        message["contextId"] = context_id
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


async def test_another_tenants_session_is_unknown_through_every_door(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    llm.add_text("Hello, a.")
    async with http(hub, as_tenant("a")) as a, http(hub, as_tenant("b")) as b, http(hub) as admin:
        first = await ask(a, query="my secret plan")
        assert first.status_code == 200, first.text
        session_id = first.json()["session_id"]

        # HTTP: read, delete, continue; SSE: continue.
        for response in (
            await b.get(f"/sessions/{session_id}"),
            await b.delete(f"/sessions/{session_id}"),
            await ask(b, session_id=session_id),
        ):
            assert response.status_code == 404 and response.json()["error_code"] == "unknown_session"
            assert "secret" not in response.text
        streamed = await b.post("/query", json={"query": "hi", "session_id": session_id, "stream": True})
        assert sse_result(streamed.text)["error_code"] == "unknown_session"

        # The OpenAI-compatible API: its session header.
        chat = await b.post(
            "/v1/chat/completions",
            json={"model": "openagent", "messages": [{"role": "user", "content": "go on"}]},
            headers={"X-OpenAgent-Session-Id": session_id},
        )
        assert chat.status_code == 404 and chat.json()["error_code"] == "unknown_session"

        # WebSocket: a query frame with the session_id.
        peer = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("b"))
        try:
            await peer.register("b-asker", role="query")
            await peer.send({"type": "query", "query_id": "q-b", "query": "hi", "session_id": session_id})
            result = await peer.recv()
            assert (result["type"], result["success"], result["error_code"]) == (
                "query_result",
                False,
                "unknown_session",
            )
        finally:
            await peer.close()

        # MCP: the ask tool's session_id.
        async with (
            httpx2.AsyncClient(headers=as_tenant("b"), timeout=DEADLINE) as mcp_http,
            Client(streamable_http_client(f"{hub.base_url}/mcp", http_client=mcp_http)) as mcp,
        ):
            asked = await mcp.call_tool("ask", {"query": "hi", "session_id": session_id})
            assert asked.is_error is True
            assert asked.structured_content is not None
            assert asked.structured_content["error_code"] == "unknown_session"

        # The run's record.
        run_id = first.json()["run_id"]
        gone = await b.get(f"/runs/{run_id}")
        assert gone.status_code == 404 and gone.json()["error_code"] == "unknown_run"
        assert (await a.get(f"/runs/{run_id}")).json()["tenant"] == "a"
        assert (await admin.get(f"/runs/{run_id}")).status_code == 200

        assert len(llm.requests) == 1  # no door reached the LLM for b
        # The owner and an administrator still see it.
        assert (await a.get(f"/sessions/{session_id}")).status_code == 200
        assert (await admin.get(f"/sessions/{session_id}")).status_code == 200
        assert (await a.delete(f"/sessions/{session_id}")).status_code == 200


async def test_another_tenants_a2a_tasks_and_contexts_are_unknown(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    llm.add_text("Noted, a.")
    async with http(hub, as_tenant("a")) as a, http(hub, as_tenant("b")) as b:
        sent = (await a.post("/a2a", json=a2a_send("remember the code 1234"))).json()["result"]
        task_id, context_id = sent["id"], sent["contextId"]
        assert sent["status"]["state"] == "completed", sent

        get = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task_id}}
        assert "result" in (await a.post("/a2a", json=get)).json()
        refused = (await b.post("/a2a", json=get)).json()
        assert "result" not in refused and "not found" in refused["error"]["message"].lower(), refused
        listed = (await b.post("/a2a", json={**get, "method": "tasks/list", "params": {}})).json()
        assert task_id not in json.dumps(listed)

        # b naming a's contextId starts a session of its own: a's turns never reach the LLM for b.
        llm.add_text("Hello, b.")
        again = (await b.post("/a2a", json=a2a_send("what was the code?", context_id))).json()["result"]
        assert again["status"]["state"] == "completed", again
        assert "1234" not in json.dumps(llm.requests[-1]["messages"])


async def test_another_tenants_approvals_and_attachments_are_unknown(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    bank = await RawPeer.connect(
        hub.ws_url, additional_headers=ADMIN
    )  # an administrator's agent: shared with every tenant
    try:
        await bank.register("bank", tools=[GATED])
        llm.add_tool_call("bank__wire", {"to": "bob"})
        async with http(hub, as_tenant("a")) as a, http(hub, as_tenant("b")) as b, http(hub) as admin:
            paused = (await ask(a, query="pay bob", auto_mode=True)).json()  # auto: tools offered again
            assert paused["status"] == "awaiting_approval", paused
            session_id = paused["session_id"]
            [approval] = paused["approvals"]
            approval_id = approval["approval_id"]

            for response in (
                await b.get(f"/approvals/{approval_id}"),
                await b.post(f"/approvals/{approval_id}", json={"decision": "approve"}),
                await b.post(f"/approvals/{approval_id}/resume"),
            ):
                assert response.status_code == 404, response.text
                assert response.json()["error_code"] == "unknown_approval"
            assert (await b.get("/approvals", params={"session_id": session_id})).json() == {"approvals": []}
            assert (await b.get("/approvals")).json() == {"approvals": []}  # every session's pending ones
            rag = await b.get("/query/session-rag-context", params={"session_id": session_id})
            assert rag.status_code == 404 and rag.json()["error_code"] == "unknown_session"

            # Nothing was decided: a still sees it pending; an administrator sees it too.
            assert (await a.get(f"/approvals/{approval_id}")).json()["status"] == "pending"
            listed = (await a.get("/approvals", params={"session_id": session_id})).json()
            assert [x["approval_id"] for x in listed["approvals"]] == [approval_id]
            assert (await admin.get(f"/approvals/{approval_id}")).status_code == 200
            for client in (a, admin):
                pending = (await client.get("/approvals")).json()["approvals"]
                assert approval_id in [x["approval_id"] for x in pending]
            own = await a.get("/query/session-rag-context", params={"session_id": session_id})
            assert own.status_code == 200 and own.json()["attachments"] == []

            # An administrator continuing a's session makes an approval a's session owns: a's.
            llm.add_text("Noted.")
            other = (await ask(a, query="hello")).json()["session_id"]
            llm.add_tool_call("bank__wire", {"to": "carol"})
            helped = (await ask(admin, query="pay carol", session_id=other)).json()
            [theirs] = helped["approvals"]
            assert (await a.get(f"/approvals/{theirs['approval_id']}")).status_code == 200
            assert (await b.get(f"/approvals/{theirs['approval_id']}")).status_code == 404

            # Decided by an administrator, a's run goes on as a's: another tenant's agent is not offered.
            other_tenant = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("c", "agent"))
            try:
                await other_tenant.register("c-only", tools=[tool("x")])
                llm.add_text("Not paid.")
                decided = await admin.post(f"/approvals/{approval_id}", json={"decision": "reject"})
                assert decided.status_code == 200 and decided.json()["answer"] == "Not paid.", decided.text
                assert offered(llm.requests[-1]) == {"bank__wire"}
            finally:
                await other_tenant.close()
    finally:
        await bank.close()


def offered(request: dict[str, Any]) -> set[str]:
    """The function names of the tools an LLM request offers."""
    return {entry["function"]["name"] for entry in request.get("tools") or []}


async def test_a_tenants_agents_are_offered_to_its_queries_only(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    shared = await RawPeer.connect(hub.ws_url, additional_headers=ADMIN)
    own = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("a", "agent"))
    try:
        await shared.register("shared", tools=[tool("lookup")])
        await own.register("a-only", tools=[tool("secret")])
        assert hub.services.registry.get("a-only").tenant == "a"  # type: ignore[union-attr]

        async with http(hub, as_tenant("a")) as a, http(hub, as_tenant("b")) as b, http(hub) as admin:
            llm.add_text("b's answer")
            assert (await ask(b)).status_code == 200
            assert offered(llm.requests[-1]) == {"shared__lookup"}
            llm.add_text("a's answer")
            assert (await ask(a)).status_code == 200
            assert offered(llm.requests[-1]) == {"shared__lookup", "a-only__secret"}

            # Named explicitly, it is as unknown to b as an agent that does not exist.
            named = await ask(b, allowed_agent_ids=["a-only"])
            assert named.status_code == 400 and named.json()["error_code"] == "unknown_agent"
            assert "'a-only'" in named.json()["error"] and "known agents: 'shared'" in named.json()["error"]
            rows = {row["agent_id"] for row in (await b.get("/agents")).json()["agents"]}
            assert rows == {"shared"}
            every = {row["agent_id"]: row for row in (await admin.get("/agents")).json()["agents"]}
            assert every["a-only"]["tenant"] == "a" and "tenant" not in every["shared"]

            models = {m["id"] for m in (await b.get("/v1/models")).json()["data"]}
            assert models == {"openagent", "openagent/shared"}

        # MCP: b lists the shared tools only, and a call to a's tool is refused as unknown.
        async with (
            httpx2.AsyncClient(headers=as_tenant("b"), timeout=DEADLINE) as mcp_http,
            Client(streamable_http_client(f"{hub.base_url}/mcp", http_client=mcp_http)) as mcp,
        ):
            listed = {t.name for t in (await mcp.list_tools()).tools}
            assert listed == {"ask", "shared__lookup"}
            with pytest.raises(MCPError) as unknown:
                await mcp.call_tool("a-only__secret", {})
            assert "unknown tool 'a-only__secret'" in str(unknown.value)  # as one that does not exist

        # A direct tool call (MCP and A2A tools/call go through it) to another tenant's agent.
        entry = hub.services.entry
        b_principal = Principal("key-b", "b", Role.CLIENT, "b")
        with pytest.raises(ToolRefused) as refused:
            await entry.call_tool("a-only", "secret", {}, door="mcp", principal=b_principal)
        assert refused.value.code == "unknown_agent"
        assert {t.agent_id for t in entry.offered_tools(principal=b_principal)} == {"shared"}
    finally:
        await shared.close()
        await own.close()


async def test_an_administrator_registers_a_websocket_agent_for_one_tenant(hub: InProcessMaster) -> None:
    peer = await RawPeer.connect(f"{hub.ws_url}?tenant=a", additional_headers=ADMIN)
    try:
        await peer.register("for-a", tools=[tool("t")])
        assert hub.services.registry.get("for-a").tenant == "a"  # type: ignore[union-attr]
        assert hub.services.agents.known_ids(Scope.for_tenant("b"), ["for-a"]) == set()
    finally:
        await peer.close()


async def test_a_tenants_agent_key_cannot_take_over_another_tenants_agent(hub: InProcessMaster) -> None:
    first = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("a", "agent"))
    second = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("b", "agent"))
    try:
        await first.register("worker", tools=[tool("work")])
        await second.send(
            {"type": "register", "agent_id": "worker", "role": "action", "tools": [tool("work")]}
        )
        refused = await second.recv()
        assert (refused["type"], refused["code"]) == ("error", "agent_conflict")
        assert hub.services.registry.get("worker").tenant == "a"  # type: ignore[union-attr]
    finally:
        await first.close()
        await second.close()


async def test_a_tenants_flood_is_refused_while_the_other_tenants_queries_run() -> None:
    release = asyncio.Event()
    held = 0

    async def answer(messages: Any, tools: Any) -> ChatResult:
        nonlocal held
        if messages[-1]["content"] == "flood":
            held += 1
            await release.wait()
        return ChatResult("done")

    async with (
        keyed_master(
            FunctionChatModel(answer),
            openagent_tenant_max_concurrent_queries=2,
            openagent_max_queries_in_flight=8,
        ) as master,
        http(master, as_tenant("a")) as a,
        http(master, as_tenant("b")) as b,
    ):
        flood = [asyncio.create_task(ask(a, query="flood")) for _ in range(2)]
        try:
            await until(lambda: held == 2, "a's two queries to reach the LLM")
            over = await ask(a, query="flood")
            assert over.status_code == 429 and over.json()["error_code"] == "too_many_queries"
            assert "tenant 'a'" in over.json()["error"]
            assert "OPENAGENT_TENANT_MAX_CONCURRENT_QUERIES=2" in over.json()["error"]
            # Every door counts against the same cap.
            chat = await a.post(
                "/v1/chat/completions",
                json={"model": "openagent", "messages": [{"role": "user", "content": "x"}]},
            )
            assert chat.status_code == 429 and chat.json()["error_code"] == "too_many_queries"
            # b is admitted meanwhile.
            other = await ask(b, query="hello")
            assert other.status_code == 200 and other.json()["answer"] == "done"
        finally:
            release.set()
        for done in await asyncio.gather(*flood):
            assert done.status_code == 200 and done.json()["answer"] == "done"
        assert master.services.entry.admission.by_tenant == {}


async def test_http_registration_belongs_to_the_keys_tenant_or_the_one_an_administrator_names(
    hub: InProcessMaster, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"agent_id": "inv", "invocation_base_url": "http://127.0.0.1:9", "tools": [tool("t")]}
    # Loopback is for an administrator's agents unless OPENAGENT_AGENT_URL_ALLOW names it.
    monkeypatch.setattr(hub.services.invocation, "url_policy", AgentUrlPolicy(allow="127.0.0.1"))
    async with (
        http(hub) as admin,
        http(hub, as_tenant("a", "agent")) as a_agent,
        http(hub, as_tenant("b", "agent")) as b_agent,
    ):
        try:
            assert (await admin.post("/register", json=body, params={"tenant": "b"})).status_code == 200
            assert hub.services.invocation.get("inv").tenant == "b"  # type: ignore[union-attr]

            other = await a_agent.post(
                "/register", json={**body, "agent_id": "inv-a"}, params={"tenant": "b"}
            )
            assert other.status_code == 422 and "own tenant only" in other.text
            taken = await a_agent.post("/register", json=body)
            assert taken.status_code == 409 and taken.json()["error_code"] == "agent_conflict"
            assert (await a_agent.post("/unregister", json={"agent_id": "inv"})).status_code == 404

            assert (await b_agent.post("/register", json={**body, "agent_id": "inv-b"})).status_code == 200
            assert hub.services.invocation.get("inv-b").tenant == "b"  # type: ignore[union-attr]
            assert (await admin.post("/register", json={**body, "agent_id": "inv-shared"})).status_code == 200
            assert hub.services.invocation.get("inv-shared").tenant is None  # type: ignore[union-attr]
            assert (await b_agent.post("/unregister", json={"agent_id": "inv"})).status_code == 200
        finally:  # the tests' Redis outlives this master: leave no agent behind
            for agent_id in ("inv", "inv-a", "inv-b", "inv-shared"):
                await hub.services.invocation.unregister(agent_id)


async def collaborator(
    master: InProcessMaster, agent_id: str, headers: dict[str, str] | None = None
) -> RawPeer:
    peer = await RawPeer.connect(master.ws_url, additional_headers=headers or ADMIN)
    await peer.send(
        {
            "type": "register",
            "agent_id": agent_id,
            "role": "action",
            "tools": [tool("noop")],
            "metadata": {"supports_collaboration": True},
        }
    )
    assert await peer.recv() == {"type": "registered", "agent_id": agent_id}
    return peer


async def test_a_collaboration_belongs_to_the_tenant_that_started_it(hub: InProcessMaster) -> None:
    """The collaboration routes are administrators' (the roles table); an administrator of tenant a
    starts one: its record and the session it starts are a's, unknown to b's keys."""
    alice, bob = await collaborator(hub, "alice"), await collaborator(hub, "bob")
    try:
        async with (
            http(hub, as_tenant("a", "admin")) as a_admin,
            http(hub, as_tenant("a")) as a,
            http(hub, as_tenant("b")) as b,
        ):
            post = asyncio.create_task(
                a_admin.post(
                    "/internal/collaborations", json={"agents": ["alice", "bob"], "task": "split a bill"}
                )
            )
            start_b, start_a = await bob.recv(), await alice.recv()
            assert start_a["session_id"] == start_b["session_id"]
            await bob.send(
                {"type": "collaboration_end", "session_id": start_a["session_id"], "summary": "ok"}
            )
            await alice.recv()  # the end, relayed
            outcome = (await post).json()
            sid, parent = outcome["collab_session_id"], outcome["parent_session_id"]

            assert (await a_admin.get(f"/internal/collaborations/{sid}")).json()["tenant"] == "a"
            assert (await a.get(f"/sessions/{parent}")).status_code == 200  # the session it started is a's
            gone = await b.get(f"/sessions/{parent}")
            assert gone.status_code == 404 and gone.json()["error_code"] == "unknown_session"
            assert (await b.get(f"/internal/collaborations/{sid}")).status_code == 403  # not a client's route
    finally:
        for peer in (alice, bob):
            await peer.close()


async def test_the_model_cannot_bring_another_tenants_agent_into_a_collaboration(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    """The model names whom to collaborate with (an ``enum`` no provider enforces): an agent of
    another tenant is refused as unknown by the collaboration manager, and hears nothing."""
    buyer = await collaborator(hub, "a-buyer", as_tenant("a", "agent"))
    clerk = await collaborator(hub, "a-clerk", as_tenant("a", "agent"))
    seller = await collaborator(hub, "b-seller", as_tenant("b", "agent"))
    try:
        llm.add_tool_call("start_collaboration", {"agents": ["a-buyer", "b-seller"], "task": "agree a price"})
        llm.add_text("No deal.")
        async with http(hub, as_tenant("a")) as a:
            answered = await ask(a, query="negotiate with the seller")
        assert answered.status_code == 200 and answered.json()["answer"] == "No deal.", answered.text
        told = llm.requests[1]["messages"][-1]
        assert told["role"] == "tool" and "unknown agent 'b-seller'" in told["content"], told
        with pytest.raises(TimeoutError):  # nothing reached b's agent (nor a's: nothing started)
            await seller.recv(timeout=0.2)
    finally:
        for peer in (buyer, clerk, seller):
            await peer.close()


# ---------------------------------------------------------------------- agent identity
# Every way an id is claimed or released goes through master.agents.identity.AgentIds.


async def test_a_websocket_register_cannot_take_another_tenants_http_agent(
    hub: InProcessMaster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The legacy ``register`` frame with an ``invocation_url`` is refused for b's agent id, as
    ``POST /register`` is: b's agent keeps its URL and tenant, and b can register it again."""
    monkeypatch.setattr(hub.services.invocation, "url_policy", AgentUrlPolicy(allow="127.0.0.1"))
    body = {"agent_id": "b-bank", "invocation_base_url": "http://127.0.0.1:9", "tools": [tool("pay")]}
    attacker = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("a", "agent"))
    try:
        async with http(hub, as_tenant("b", "agent")) as b_agent:
            assert (await b_agent.post("/register", json=body)).status_code == 200
            await attacker.send(
                {
                    "type": "register",
                    "agent_id": "b-bank",
                    "role": "action",
                    "tools": [tool("pay")],
                    "invocation_url": "http://127.0.0.1:8",
                }
            )
            refused = await attacker.recv()
            assert (refused["type"], refused["code"], refused["ref"]) == ("error", "agent_conflict", "b-bank")
            assert "'b-bank' is another tenant's" in refused["message"]
            stored = hub.services.invocation.get("b-bank")
            assert stored is not None and (stored.tenant, stored.base_url) == ("b", "http://127.0.0.1:9")
            assert (await b_agent.post("/register", json=body)).status_code == 200
            # Nor can a's key claim it as a WebSocket agent.
            await attacker.send(
                {"type": "register", "agent_id": "b-bank", "role": "action", "tools": [tool("x")]}
            )
            assert (await attacker.recv())["code"] == "agent_conflict"
            assert hub.services.registry.get("b-bank") is None
            assert (await b_agent.post("/unregister", json={"agent_id": "b-bank"})).status_code == 200
    finally:
        await attacker.close()


async def test_only_an_administrator_unregisters_a_shared_agent(hub: InProcessMaster) -> None:
    body = {"agent_id": "shared-inv", "invocation_base_url": "http://127.0.0.1:9", "tools": [tool("t")]}
    async with http(hub) as admin, http(hub, as_tenant("a", "agent")) as a_agent:
        try:
            assert (await admin.post("/register", json=body)).status_code == 200
            refused = await a_agent.post("/unregister", json={"agent_id": "shared-inv"})
            assert refused.status_code == 403 and refused.json()["error_code"] == "forbidden"
            assert "only an administrator may unregister it" in refused.json()["detail"]
            assert hub.services.invocation.get("shared-inv") is not None
            taken = await a_agent.post(
                "/register", json={**body, "invocation_base_url": "http://127.0.0.1:8"}
            )
            assert (
                taken.status_code == 409 and "only an administrator may change it" in taken.json()["detail"]
            )
            assert hub.services.invocation.get("shared-inv").base_url == "http://127.0.0.1:9"  # type: ignore[union-attr]
            assert (await admin.post("/unregister", json={"agent_id": "shared-inv"})).status_code == 200
        finally:
            await hub.services.invocation.unregister("shared-inv")


async def test_a_refused_unregister_keeps_the_id_of_a_websocket_agent(hub: InProcessMaster) -> None:
    """``POST /unregister`` of a WebSocket agent's id is a 404 (no HTTP agent of that id) and
    leaves the id's owner as it was: once the agent disconnects, another tenant still cannot
    take its id."""
    agent = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("a", "agent"))
    attacker = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("b", "agent"))
    try:
        await agent.register("a-live", tools=[tool("work")])
        async with http(hub, as_tenant("a", "agent")) as a_agent:
            refused = await a_agent.post("/unregister", json={"agent_id": "a-live"})
            assert refused.status_code == 404 and refused.json()["error_code"] == "not_found"
        await agent.close()
        await until(lambda: hub.services.registry.get("a-live") is None, "the agent to leave")
        await attacker.send(
            {"type": "register", "agent_id": "a-live", "role": "action", "tools": [tool("x")]}
        )
        taken = await attacker.recv()
        assert (taken["type"], taken["code"], taken["ref"]) == ("error", "agent_conflict", "a-live")
        assert hub.services.registry.get("a-live") is None
    finally:
        await agent.close()
        await attacker.close()
        await hub.services.agents.ids.release(SYSTEM, "a-live")  # the tests' Redis outlives this master


async def test_a_websocket_agents_id_is_held_for_the_ttl_after_it_leaves(hub: InProcessMaster) -> None:
    """An agent connected for longer than ``REDIS_AGENT_TTL_SECONDS`` (its owner record, written
    at its claim, expired: deleted here) still holds its id for the TTL after it disconnects:
    the record is written again when it leaves, and another tenant cannot take the id."""
    redis = hub.services.invocation.redis
    key = agent_owner_key("a-long")
    ttl = hub.services.settings.redis_agent_ttl_seconds
    agent = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("a", "agent"))
    attacker = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("b", "agent"))
    try:
        await agent.register("a-long", tools=[tool("work")])
        await redis.delete(key)  # as if a day passed while it stayed connected
        await agent.close()
        async with asyncio.timeout(DEADLINE):  # written when the master saw it leave
            while not await redis.exists(key):
                await asyncio.sleep(0.01)
        assert 0 < await redis.ttl(key) <= ttl
        await attacker.send(
            {"type": "register", "agent_id": "a-long", "role": "action", "tools": [tool("x")]}
        )
        taken = await attacker.recv()
        assert (taken["type"], taken["code"], taken["ref"]) == ("error", "agent_conflict", "a-long")
    finally:
        await agent.close()
        await attacker.close()
        await hub.services.agents.ids.release(SYSTEM, "a-long")  # the tests' Redis outlives this master


async def test_a_query_client_never_takes_an_action_agents_id(hub: InProcessMaster) -> None:
    """A client key's ``register`` as a query client under its tenant's action agent's id is
    refused with a clear error; the agent stays connected and is not replaced."""
    agent = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("a", "agent"))
    client = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("a"))
    try:
        await agent.register("a-worker", tools=[tool("work")])
        await client.send({"type": "register", "agent_id": "a-worker", "role": "query"})
        refused = await client.recv()
        assert (refused["code"], refused["ref"]) == ("agent_conflict", "a-worker")
        assert "a query client registers under an id of its own" in refused["message"]
        live = hub.services.registry.get("a-worker")
        assert live is not None and live.role == "action"
        await agent.send({"type": "ping"})
        assert await agent.recv() == {"type": "pong"}  # still open: not closed with 4001
        await client.register("a-asker", role="query")  # its own id is fine
    finally:
        await agent.close()
        await client.close()


async def test_an_action_agent_outranks_a_query_client_and_its_id_frees_on_disconnect(
    hub: InProcessMaster,
) -> None:
    """A query client's id is its own while connected: another tenant's query client cannot take
    it, the id is free once it leaves, and an action agent of the client's tenant takes it over
    (another tenant's agent cannot: the next test)."""
    first = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("a"))
    other = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("b"))
    try:
        await first.register("t-asker", role="query")
        await other.send({"type": "register", "agent_id": "t-asker", "role": "query"})
        assert (await other.recv())["code"] == "agent_conflict"
        await first.close()
        await until(lambda: hub.services.registry.get("t-asker") is None, "the client to leave")
        await other.register("t-asker", role="query")

        agent = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("b", "agent"))
        try:
            await agent.register("t-asker", tools=[tool("work")])
            replaced = await other.recv()
            assert (replaced["code"], replaced["ref"]) == ("agent_replaced", "t-asker")
            assert "key 'agent of b' registered agent 't-asker'" in replaced["message"]
            with pytest.raises(ConnectionClosed) as closed:
                await other.recv()
            assert closed.value.rcvd is not None
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4001, REPLACED_BY_ANOTHER_KEY)
        finally:
            await agent.close()
            async with http(hub, as_tenant("b", "agent")) as b_agent:  # the tests' Redis outlives this master
                await b_agent.post("/unregister", json={"agent_id": "t-asker"})
    finally:
        await first.close()
        await other.close()


async def test_another_tenants_agent_key_cannot_take_a_live_query_clients_id(hub: InProcessMaster) -> None:
    """An action agent outranks a query client of its own tenant only: tenant a's agent key gets
    ``agent_conflict`` for b's live query client's id, and b's client stays connected."""
    asker = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("b"))
    attacker = await RawPeer.connect(hub.ws_url, additional_headers=as_tenant("a", "agent"))
    try:
        await asker.register("b-asker", role="query")
        await attacker.send(
            {"type": "register", "agent_id": "b-asker", "role": "action", "tools": [tool("x")]}
        )
        refused = await attacker.recv()
        assert (refused["type"], refused["code"], refused["ref"]) == ("error", "agent_conflict", "b-asker")
        assert "'b-asker' is another tenant's" in refused["message"]
        live = hub.services.registry.get("b-asker")
        assert live is not None and (live.role, live.tenant) == ("query", "b")
        await asker.send({"type": "ping"})
        assert await asker.recv() == {"type": "pong"}  # still open: not closed with 4001
    finally:
        await attacker.close()
        await asker.close()


async def test_the_sdks_agent_reconnects_when_another_key_replaces_it_and_stops_when_a_copy_does(
    hub: InProcessMaster, caplog: pytest.LogCaptureFixture
) -> None:
    """Replaced by a connection of another key of its tenant, the SDK's agent logs who and
    reconnects (with backoff) under its id; replaced by a second copy of itself (its own key),
    it stops with ``AgentReplacedError``."""
    store = hub.services.keys
    assert store is not None
    _, other_key = await store.create(name="second agent of a", role=Role.AGENT, tenant="a", agent_ids=["*"])
    own_key = _SECRETS[("a", "agent")]
    register = Register(agent_id="sdk-worker", role="action", tools=[ToolSchema.model_validate(tool("work"))])
    config = ClientConfig(
        master_ws=hub.ws_url,
        api_key=own_key,
        keepalive_interval=0,
        reconnect_initial_delay=0.05,
        reconnect_max_delay=0.2,
    )
    client = AgentClient(register, config=config)
    await client.connect()
    try:
        first = hub.services.registry.get("sdk-worker")
        assert first is not None
        other = await RawPeer.connect(hub.ws_url, additional_headers={"Authorization": f"Bearer {other_key}"})
        try:
            await other.register("sdk-worker", tools=[tool("work")])
            replaced = await other.recv()  # the SDK's agent came back and took its id again
            assert (replaced["code"], replaced["ref"]) == ("agent_replaced", "sdk-worker")
        finally:
            await other.close()
        await until(
            lambda: (
                (live := hub.services.registry.get("sdk-worker")) is not None
                and live.key_id == first.key_id
                and live is not first
            ),
            "the SDK's agent to reconnect",
        )
        assert client.fatal_error is None
        assert "by a connection of another key (key 'second agent of a' registered agent" in caplog.text

        copy = await RawPeer.connect(hub.ws_url, additional_headers={"Authorization": f"Bearer {own_key}"})
        try:
            await copy.register("sdk-worker", tools=[tool("work")])
            with pytest.raises(AgentReplacedError, match="newer connection registered the same agent_id"):
                async with asyncio.timeout(DEADLINE):
                    await client.wait_closed()
        finally:
            await copy.close()
    finally:
        await client.close()


# ---------------------------------------------------------------------- who approves


async def test_keys_that_approve_a_tool_decide_its_approvals_and_never_the_asker(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    """Without keys that approve ``bank__wire``, the asker's key decides its own call (approvals
    guard against the model); once a key of the tenant approves it, only such keys decide, and
    never the key that asked (403 naming the rule), through the one decision every door uses."""
    store = hub.services.keys
    assert store is not None
    made = []

    async def key(name: str, approves: list[str]) -> dict[str, str]:
        stored, secret = await store.create(name=name, role=Role.CLIENT, tenant="ap", approves=approves)
        made.append(stored.key_id)
        return {"Authorization": f"Bearer {secret}"}

    bank = await RawPeer.connect(hub.ws_url, additional_headers=ADMIN)
    try:
        await bank.register("bank", tools=[GATED])

        async def held(client: httpx.AsyncClient) -> str:
            llm.add_tool_call("bank__wire", {"to": "bob"})
            paused = (await ask(client, query="pay bob")).json()
            assert paused["status"] == "awaiting_approval", paused
            return str(paused["approvals"][0]["approval_id"])

        async def approve(client: httpx.AsyncClient, approval_id: str) -> httpx.Response:
            """Approve as ``client``; the bank answers the call that then runs."""
            decided = asyncio.create_task(
                client.post(f"/approvals/{approval_id}", json={"decision": "approve"})
            )
            call = await bank.recv()
            assert call["type"] == "tool_call", call
            await bank.send(
                {"type": "tool_result", "call_id": call["call_id"], "success": True, "result": "sent"}
            )
            return await decided

        async with http(hub, await key("asker", [])) as asker:
            first = await held(asker)
            llm.add_text("Paid.")  # no key approves bank__wire yet: the asker decides
            own = await approve(asker, first)
            assert own.status_code == 200 and own.json()["answer"] == "Paid.", own.text

            async with (
                http(hub, await key("treasurer", ["bank__*"])) as treasurer,
                http(hub, await key("teller", ["bank__wire"])) as teller,
            ):
                approval_id = await held(asker)
                refused = await asker.post(f"/approvals/{approval_id}", json={"decision": "approve"})
                assert refused.status_code == 403 and refused.json()["error_code"] == "forbidden"
                assert "only keys whose 'approves' patterns match 'bank__wire'" in refused.json()["detail"]
                assert (await asker.get(f"/approvals/{approval_id}")).json()["status"] == "pending"
                llm.add_text("Paid by the treasurer.")
                decided = await approve(treasurer, approval_id)
                assert decided.status_code == 200 and decided.json()["answer"] == "Paid by the treasurer."

                mine = await held(teller)  # a key that approves the tool asked: not for it to decide
                refused = await teller.post(f"/approvals/{mine}", json={"decision": "approve"})
                assert refused.status_code == 403
                assert "the key that asked never decides it" in refused.json()["detail"]
                llm.add_text("Rejected.")
                rejected = await treasurer.post(f"/approvals/{mine}", json={"decision": "reject"})
                assert rejected.status_code == 200 and rejected.json()["answer"] == "Rejected."
    finally:
        await bank.close()
        for key_id in made:  # the tests' Redis outlives this master
            await store.revoke(key_id)


async def test_the_key_that_asked_never_decides_a_later_round_of_its_run(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    """A run resumed after its first approval goes on as the key that asked: when the model
    then holds another call, that key (itself an approver of the tool) is still refused on the
    second round, and another approver decides it."""
    store = hub.services.keys
    assert store is not None
    made = []

    async def key(name: str, approves: list[str]) -> dict[str, str]:
        stored, secret = await store.create(name=name, role=Role.CLIENT, tenant="ap2", approves=approves)
        made.append(stored.key_id)
        return {"Authorization": f"Bearer {secret}"}

    bank = await RawPeer.connect(hub.ws_url, additional_headers=ADMIN)
    try:
        await bank.register("bank", tools=[GATED])
        async with (
            http(hub, await key("teller", ["bank__*"])) as teller,
            http(hub, await key("treasurer", ["bank__*"])) as treasurer,
        ):
            llm.add_tool_call("bank__wire", {"to": "bob"})
            paused = (await ask(teller, query="pay bob, then carol", auto_mode=True)).json()
            assert paused["status"] == "awaiting_approval", paused
            first = paused["approvals"][0]["approval_id"]
            llm.add_tool_call("bank__wire", {"to": "carol"})  # the resumed run holds a second call
            decided = asyncio.create_task(treasurer.post(f"/approvals/{first}", json={"decision": "approve"}))
            call = await bank.recv()
            assert call["type"] == "tool_call", call
            await bank.send(
                {"type": "tool_result", "call_id": call["call_id"], "success": True, "result": "sent"}
            )
            again = (await decided).json()
            assert again["status"] == "awaiting_approval", json.dumps(again)
            second = again["approvals"][0]["approval_id"]
            assert second != first

            refused = await teller.post(f"/approvals/{second}", json={"decision": "approve"})
            assert refused.status_code == 403, refused.text
            assert "the key that asked never decides it" in refused.json()["detail"]
            assert (await teller.get(f"/approvals/{second}")).json()["status"] == "pending"
            llm.add_text("Carol is not paid.")
            rejected = await treasurer.post(f"/approvals/{second}", json={"decision": "reject"})
            assert rejected.status_code == 200 and rejected.json()["answer"] == "Carol is not paid."
    finally:
        await bank.close()
        for key_id in made:  # the tests' Redis outlives this master
            await store.revoke(key_id)


async def test_another_tenants_paused_run_is_not_found_nor_resumed(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    """``held_run`` answers nothing for a scope that does not see the session, so a desk asked
    to resume another tenant's paused run never takes "no pending approval visible" for "all
    decided": the run stays paused for its own tenant."""
    bank = await RawPeer.connect(hub.ws_url, additional_headers=ADMIN)
    try:
        await bank.register("bank", tools=[GATED])
        llm.add_tool_call("bank__wire", {"to": "bob"})
        async with http(hub, as_tenant("a")) as tenant_a:
            paused = (await ask(tenant_a, query="pay bob")).json()
        assert paused["status"] == "awaiting_approval", paused
        session_id = paused["session_id"]
        queries = hub.services.queries
        assert await queries.held_run(session_id, Scope.for_tenant("b")) == (None, [])
        state, approvals = await queries.held_run(session_id, Scope.for_tenant("a"))
        assert state is not None and [a.status for a in approvals] == ["pending"]
        desk = hub.services.approvals
        assert desk is not None
        assert not await desk.paused(session_id, Scope.for_tenant("b"))
        started = await desk.start_resume(session_id, Scope.for_tenant("b"))
        assert getattr(started, "status", None) == "completed"  # nothing of b's to resume
        assert await desk.paused(session_id, Scope.for_tenant("a"))  # still waits for a's decision
    finally:
        await bank.close()


async def test_approves_on_keys_that_cannot_decide_locks_no_one_out(
    hub: InProcessMaster, llm: ScriptedOpenAIServer
) -> None:
    """A viewer's or an agent's key carrying ``approves`` (stored before ``POST /keys`` refused
    it) cannot decide approvals, so it does not make the tenant's client keys lose them: the
    asker still decides its own call."""
    store = hub.services.keys
    assert store is not None
    made = [
        (await store.create(name=f"{role} approver", role=role, tenant="ap2", approves=["bank__*"]))[0]
        for role in (Role.VIEWER, Role.AGENT)
    ]
    asker_key, asker_secret = await store.create(name="asker", role=Role.CLIENT, tenant="ap2")
    made.append(asker_key)
    bank = await RawPeer.connect(hub.ws_url, additional_headers=ADMIN)
    try:
        await bank.register("bank", tools=[GATED])
        async with http(hub, {"Authorization": f"Bearer {asker_secret}"}) as asker:
            llm.add_tool_call("bank__wire", {"to": "bob"})
            paused = (await ask(asker, query="pay bob")).json()
            assert paused["status"] == "awaiting_approval", paused
            llm.add_text("Paid.")
            decided = asyncio.create_task(
                asker.post(
                    f"/approvals/{paused['approvals'][0]['approval_id']}", json={"decision": "approve"}
                )
            )
            call = await bank.recv()
            assert call["type"] == "tool_call", call
            await bank.send(
                {"type": "tool_result", "call_id": call["call_id"], "success": True, "result": "sent"}
            )
            answer = await decided
            assert answer.status_code == 200 and answer.json()["answer"] == "Paid.", answer.text
    finally:
        await bank.close()
        for key in made:  # the tests' Redis outlives this master
            await store.revoke(key.key_id)
