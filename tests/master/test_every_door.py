"""Every door, the same rules: the policy is decided in the core, so each door only translates.

One table names every door a query comes through (:data:`master.query.entry.Door`: a door added
to that type and not here fails :func:`test_the_walk_covers_every_door`) and how a client of
that door asks, with the client that door's users have (``httpx`` for HTTP and SSE, a raw
WebSocket peer, the official ``mcp`` client, JSON-RPC on ``/a2a``, the OpenAI wire, AG-UI's
``RunAgentInput`` read back with the official ``ag-ui-protocol`` models). Each door
then goes through the same cases, checked the same way, through the product's own surfaces
(``GET /approvals``, the agent's own record of its calls, what the LLM was sent):

- a tool that needs approval waits: nothing reaches the agent until a person decides, and the
  decision runs it exactly once (the direct calls of MCP ``tools/call`` and the A2A data part too);
- another tenant's session is out of reach: refused as unknown (or, on A2A, where a context is
  the asker's own, a new session), and the LLM never sees what the other tenant said;
- another tenant's agent is never offered;
- the run's verbs: a person's approval through each door's own dialogue (``POST /approvals``,
  MCP elicitation, an A2A message on the waiting task, an AG-UI ``resume``, a Responses
  ``mcp_approval_response``) resumes the run once (``RunVerbs.resume``), and a run paused on one
  master and cancelled through another resumes through no door;

and every way an agent id is claimed or released refuses another tenant's id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, get_args

import httpx
import httpx2
import pytest
from ag_ui.core import Event as AgUiEvent
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from pydantic import TypeAdapter

from master.auth import Role as KeyRole
from master.query.entry import Door
from openagent import ClientConfig as AgentConfig
from openagent import OrchestratorActionAgent, ToolSchema
from openagent.testing import ScriptedOpenAIServer
from tests.factories import EVERY_TENANT, InProcessMaster, RawPeer, in_process_master

ADMIN_KEY = "every-door-admin"
DEADLINE = 60
SECRET = "the vault code is 4711"

TRANSFER = ToolSchema(
    name="transfer",
    description="Transfer money to someone",
    parameters={
        "type": "object",
        "properties": {"to": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["to", "amount"],
    },
    requires_approval=True,
)
PAYMENT = {"to": "bob", "amount": 250}
AG_UI_EVENT: TypeAdapter[Any] = TypeAdapter(AgUiEvent)


@dataclass
class Hub:
    master: InProcessMaster
    keys: dict[tuple[str, str], str]
    """(tenant, role) → the secret of that key."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """The bank agent's transfers, as its handler ran them."""

    def headers(self, tenant: str | None = "a", role: str = "client") -> dict[str, str]:
        secret = ADMIN_KEY if tenant is None else self.keys[(tenant, role)]
        return {"Authorization": f"Bearer {secret}"}

    def http(self, tenant: str | None = "a", role: str = "client") -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.master.base_url, headers=self.headers(tenant, role), timeout=DEADLINE
        )


@pytest.fixture
async def hub(llm: ScriptedOpenAIServer) -> AsyncIterator[Hub]:
    """A keyed master on the scripted LLM, a ``client`` and an ``agent`` key of tenants a and b,
    and the bank agent (an administrator's: shared with every tenant) whose transfer needs approval."""
    async with in_process_master(
        openagent_api_key=ADMIN_KEY,
        openai_base_url=llm.base_url,
        openai_api_key="scripted",
        openagent_agent_url_allow="127.0.0.1",  # the agent URL policy lets tenants' keys register here
    ) as master:
        store = master.services.keys
        assert store is not None
        keys = {}
        for tenant in ("a", "b"):
            for role in (KeyRole.CLIENT, KeyRole.AGENT):
                _, keys[(tenant, str(role))] = await store.create(
                    name=f"{role} of {tenant}",
                    role=role,
                    tenant=tenant,
                    agent_ids=["*"] if role is KeyRole.AGENT else [],
                )
        running = Hub(master, keys)

        async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> Any:
            running.calls.append(arguments)
            return {"sent": arguments}

        config = AgentConfig(master_ws=master.ws_url, api_key=ADMIN_KEY)
        async with OrchestratorActionAgent("bank", [TRANSFER], handler, config=config):
            async with asyncio.timeout(DEADLINE):
                while "bank" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            yield running


# --------------------------------------------------------------------------- the doors


@dataclass(frozen=True)
class Answer:
    """What a door answered, in the door-neutral terms the cases check."""

    error_code: str | None
    """Why the query was refused (``None``: it was answered, or it waits)."""
    session_id: str | None = None


Ask = Callable[[Hub, dict[str, str], str, "str | None"], Awaitable[Answer]]
"""How a client of one door asks ``query`` (in the session named, if any) with these headers."""


async def _http(hub: Hub, headers: dict[str, str], query: str, session_id: str | None) -> Answer:
    async with httpx.AsyncClient(base_url=hub.master.base_url, headers=headers, timeout=DEADLINE) as http:
        body = (await http.post("/query", json={"query": query, "session_id": session_id})).json()
    return Answer(body.get("error_code"), body.get("session_id"))


async def _sse(hub: Hub, headers: dict[str, str], query: str, session_id: str | None) -> Answer:
    async with httpx.AsyncClient(base_url=hub.master.base_url, headers=headers, timeout=DEADLINE) as http:
        text = (
            await http.post("/query", json={"query": query, "session_id": session_id, "stream": True})
        ).text
    blocks = [block.split("\n", 1) for block in text.strip().split("\n\n")]
    [data] = [rest for head, rest in blocks if head == "event: query_result"]
    body = json.loads(data.removeprefix("data: "))
    return Answer(body.get("error_code"), body.get("session_id"))


async def _websocket(hub: Hub, headers: dict[str, str], query: str, session_id: str | None) -> Answer:
    peer = await RawPeer.connect(hub.master.ws_url, additional_headers=headers)
    try:
        await peer.register(f"asker-{uuid.uuid4().hex[:8]}", role="query")
        await peer.send({"type": "query", "query_id": "q-1", "query": query, "session_id": session_id})
        while (frame := await peer.recv(timeout=DEADLINE))["type"] != "query_result":
            pass
    finally:
        await peer.close()
    return Answer(frame.get("error_code"), frame.get("session_id"))


async def _mcp(hub: Hub, headers: dict[str, str], query: str, session_id: str | None) -> Answer:
    arguments = {"query": query, **({"session_id": session_id} if session_id else {})}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=DEADLINE) as http,
        McpClient(streamable_http_client(f"{hub.master.base_url}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool("ask", arguments)
    structured = result.structured_content or {}
    return Answer(structured.get("error_code"), structured.get("session_id"))


async def _a2a(hub: Hub, headers: dict[str, str], query: str, session_id: str | None) -> Answer:
    """A2A names no session: a context is the asker's own (``session_id`` is sent as the context)."""
    message: dict[str, Any] = {
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": query}],
        **({"contextId": session_id} if session_id else {}),
    }
    request = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    async with httpx.AsyncClient(base_url=hub.master.base_url, headers=headers, timeout=DEADLINE) as http:
        body = (await http.post("/a2a", json=request)).json()
    if "error" in body:
        return Answer(str(body["error"].get("data", {}).get("error_code") or body["error"]["message"]))
    return Answer(None, body["result"].get("contextId"))


async def _openai(hub: Hub, headers: dict[str, str], query: str, session_id: str | None) -> Answer:
    extra = {"X-OpenAgent-Session-Id": session_id} if session_id else {}
    async with httpx.AsyncClient(base_url=hub.master.base_url, headers=headers, timeout=DEADLINE) as http:
        response = await http.post(
            "/v1/chat/completions",
            json={"model": "openagent", "messages": [{"role": "user", "content": query}]},
            headers=extra,
        )
    if response.status_code != 200:
        return Answer(response.json()["error_code"])
    return Answer(None, response.headers.get("X-OpenAgent-Session-Id"))


async def _agui(hub: Hub, headers: dict[str, str], query: str, session_id: str | None) -> Answer:
    """AG-UI names the session by its thread: a new thread (a new id) for a new session."""
    body = {
        "threadId": session_id or str(uuid.uuid4()),
        "runId": uuid.uuid4().hex,
        "messages": [{"id": uuid.uuid4().hex, "role": "user", "content": query}],
    }
    async with httpx.AsyncClient(base_url=hub.master.base_url, headers=headers, timeout=DEADLINE) as http:
        response = await http.post("/ag-ui", json=body)
    if response.status_code != 200:
        return Answer(response.json()["error_code"])
    events = [
        AG_UI_EVENT.validate_json(b.removeprefix("data: ")) for b in response.text.split("\n\n") if b.strip()
    ]
    if events[-1].type.value == "RUN_ERROR":
        return Answer(events[-1].code)
    [snapshot] = [event for event in events if event.type.value == "STATE_SNAPSHOT"]
    return Answer(None, snapshot.snapshot["openagent"]["sessionId"])


async def _responses(hub: Hub, headers: dict[str, str], query: str, session_id: str | None) -> Answer:
    """The Responses API names a session as the chat door does (header, or ``metadata.session_id``)."""
    extra = {"X-OpenAgent-Session-Id": session_id} if session_id else {}
    async with httpx.AsyncClient(base_url=hub.master.base_url, headers=headers, timeout=DEADLINE) as http:
        response = await http.post(
            "/v1/responses", json={"model": "openagent", "input": query}, headers=extra
        )
    if response.status_code != 200:
        return Answer(response.json()["error_code"])
    return Answer(None, response.json()["openagent"]["session_id"])


DOORS: dict[str, Ask] = {
    "http": _http,
    "sse": _sse,
    "websocket": _websocket,
    "mcp": _mcp,
    "a2a": _a2a,
    "openai": _openai,
    "agui": _agui,
    "responses": _responses,
}
every_door = pytest.mark.parametrize("door", list(DOORS))


def test_the_walk_covers_every_door() -> None:
    assert set(DOORS) == set(get_args(Door))


async def _pending(hub: Hub, but: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Tenant a's pending approvals, but those whose ids are in ``but`` (the tests' Redis outlives
    each master: other tests of tenant a may have left some)."""
    async with hub.http("a") as a:
        approvals: list[dict[str, Any]] = (await a.get("/approvals")).json()["approvals"]
    return [x for x in approvals if x["status"] == "pending" and x["approval_id"] not in but]


async def _pending_ids(hub: Hub) -> frozenset[str]:
    return frozenset(x["approval_id"] for x in await _pending(hub))


async def _approve_once(hub: Hub, approval_id: str) -> None:
    """Approve through HTTP (a decision through any door runs the call), then check it ran once."""
    async with hub.http("a") as a:
        decided = await a.post(f"/approvals/{approval_id}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        again = await a.post(f"/approvals/{approval_id}", json={"decision": "approve"})
        assert again.status_code == 409 and again.json()["error_code"] == "approval_decided"
    assert hub.calls == [PAYMENT]


# --------------------------------------------------------------------------- the cases


@every_door
async def test_a_tool_that_needs_approval_waits_through_every_door(
    hub: Hub, llm: ScriptedOpenAIServer, door: str
) -> None:
    llm.add_tool_call("bank__transfer", PAYMENT)
    llm.add_text("Sent 250 to bob.")  # the answer once the run goes on
    before = await _pending_ids(hub)

    answer = await DOORS[door](hub, hub.headers("a"), "send 250 to bob", None)

    assert answer.error_code is None, answer
    [approval] = await _pending(hub, before)
    assert (approval["agent_id"], approval["tool_name"], approval["arguments"]) == (
        "bank",
        "transfer",
        PAYMENT,
    )
    assert hub.calls == []  # nothing reached the agent
    await _approve_once(hub, approval["approval_id"])


DIRECT: dict[str, Callable[[Hub], Awaitable[None]]] = {}
"""The doors that call a tool without the model: MCP ``tools/call``, the A2A data part."""


async def _mcp_direct(hub: Hub) -> None:
    async with (
        httpx2.AsyncClient(headers=hub.headers("a"), timeout=DEADLINE) as http,
        McpClient(streamable_http_client(f"{hub.master.base_url}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool("bank__transfer", PAYMENT)
    assert result.is_error is False and result.structured_content is not None, result
    assert [a["status"] for a in result.structured_content["approvals"]] == ["pending"]


async def _a2a_direct(hub: Hub) -> None:
    message = {
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "data", "data": {"tool": "transfer", "arguments": PAYMENT}}],
    }
    request = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    async with hub.http("a") as a:
        body = (await a.post("/a2a/agents/bank", json=request)).json()
    assert body["result"]["status"]["state"] == "input-required", body


DIRECT.update({"mcp tools/call": _mcp_direct, "a2a data part": _a2a_direct})


@pytest.mark.parametrize("door", list(DIRECT))
async def test_a_direct_call_that_needs_approval_waits_through_every_door(hub: Hub, door: str) -> None:
    before = await _pending_ids(hub)
    await DIRECT[door](hub)

    [approval] = await _pending(hub, before)
    assert (approval["agent_id"], approval["tool_name"], approval["arguments"]) == (
        "bank",
        "transfer",
        PAYMENT,
    )
    assert hub.calls == []
    await _approve_once(hub, approval["approval_id"])


@every_door
async def test_another_tenants_session_is_out_of_reach_through_every_door(
    hub: Hub, llm: ScriptedOpenAIServer, door: str
) -> None:
    llm.add_text("Noted.")
    async with hub.http("a") as a:
        first = (await a.post("/query", json={"query": SECRET})).json()
        session_id = first["session_id"]
        turns = len((await a.get(f"/sessions/{session_id}")).json()["turns"])
    seen = len(llm.requests)
    llm.add_text("Hello, b.")  # only for a door that starts b a session of its own

    answer = await DOORS[door](hub, hub.headers("b"), "what is the vault code?", session_id)

    if door == "a2a":  # a context id is the asker's own label: b's names a session of b's
        assert answer.error_code is None, answer
    else:
        assert answer.error_code == "unknown_session", answer
    assert SECRET not in json.dumps(llm.requests[seen:])  # the LLM never saw a's turns for b
    async with hub.http("a") as a:  # a's session is as it was
        assert len((await a.get(f"/sessions/{session_id}")).json()["turns"]) == turns
    llm.reset()


@every_door
async def test_another_tenants_agent_is_never_offered_through_every_door(
    hub: Hub, llm: ScriptedOpenAIServer, door: str
) -> None:
    own = await RawPeer.connect(hub.master.ws_url, additional_headers=hub.headers("a", "agent"))
    try:
        await own.register(
            "a-vault", tools=[{"name": "open", "description": "Open the vault", "parameters": {}}]
        )
        llm.add_text("No vault here.")
        seen = len(llm.requests)

        answer = await DOORS[door](hub, hub.headers("b"), "open the vault", None)

        assert answer.error_code is None, answer
        [request] = llm.requests[seen:]
        offered = {entry["function"]["name"] for entry in request.get("tools") or []}
        assert "a-vault__open" not in offered and "bank__transfer" in offered
    finally:
        await own.close()


# --------------------------------------------------------------------------- agent identity


async def _ws_action(hub: Hub, headers: dict[str, str], agent_id: str) -> str | None:
    return await _ws_register(hub, headers, {"agent_id": agent_id, "role": "action", "tools": []})


async def _ws_query(hub: Hub, headers: dict[str, str], agent_id: str) -> str | None:
    return await _ws_register(hub, headers, {"agent_id": agent_id, "role": "query"})


LEDGER_TOOLS = [{"name": "read", "description": "Read", "parameters": {"type": "object"}}]
AGENT_URL = "http://127.0.0.1:9"
"""An invocation agent's URL the policy allows (nothing answers: it registers ``DOWN``)."""


async def _ws_invocation(hub: Hub, headers: dict[str, str], agent_id: str) -> str | None:
    frame = {"agent_id": agent_id, "role": "action", "tools": LEDGER_TOOLS, "invocation_url": AGENT_URL}
    return await _ws_register(hub, headers, frame)


async def _ws_register(hub: Hub, headers: dict[str, str], frame: dict[str, Any]) -> str | None:
    """The error code of a WebSocket ``register`` (``None``: registered)."""
    peer = await RawPeer.connect(hub.master.ws_url, additional_headers=headers)
    try:
        await peer.send({"type": "register", **frame})
        reply = await peer.recv(timeout=DEADLINE)
    finally:
        await peer.close()
    return None if reply["type"] == "registered" else str(reply.get("code"))


async def _http_register(hub: Hub, headers: dict[str, str], agent_id: str) -> str | None:
    body = {"agent_id": agent_id, "invocation_base_url": AGENT_URL, "tools": LEDGER_TOOLS}
    async with httpx.AsyncClient(base_url=hub.master.base_url, headers=headers, timeout=DEADLINE) as http:
        response = await http.post("/register", json=body)
    return None if response.status_code == 200 else str(response.json()["error_code"])


async def _http_unregister(hub: Hub, headers: dict[str, str], agent_id: str) -> str | None:
    async with httpx.AsyncClient(base_url=hub.master.base_url, headers=headers, timeout=DEADLINE) as http:
        response = await http.post("/unregister", json={"agent_id": agent_id})
    return None if response.status_code == 200 else str(response.json()["error_code"])


CLAIMS: dict[str, tuple[str, Callable[[Hub, dict[str, str], str], Awaitable[str | None]]]] = {
    "ws register (action)": ("agent", _ws_action),
    "ws register (query)": ("client", _ws_query),
    "ws register (invocation_url)": ("agent", _ws_invocation),
    "POST /register": ("agent", _http_register),
    "POST /unregister": ("agent", _http_unregister),
}


IDENTITY_REFUSALS = {"agent_conflict", "forbidden", "not_found"}
"""An id held by another tenant: taken (``agent_conflict``), not the key's to drop (``forbidden``),
or not even visible (``not_found``)."""


@pytest.mark.parametrize("path", list(CLAIMS))
async def test_another_tenants_agent_id_cannot_be_claimed_or_released(hub: Hub, path: str) -> None:
    """Tenant a holds ``a-ledger`` (WebSocket) and ``a-inv`` (HTTP); an administrator's ``bank``
    (WebSocket) and ``shared-inv`` (HTTP) are shared with every tenant. Tenant b's key tries to take
    or drop each through ``path``: every one is refused by the identity rule."""
    own = f"b-own-{uuid.uuid4().hex[:8]}"
    ledger = await RawPeer.connect(hub.master.ws_url, additional_headers=hub.headers("a", "agent"))
    try:
        await ledger.register("a-ledger", tools=LEDGER_TOOLS)
        assert await _http_register(hub, hub.headers("a", "agent"), "a-inv") is None
        assert await _http_register(hub, hub.headers(None), "shared-inv") is None
        role, claim = CLAIMS[path]
        # The path works on an id of b's own (so a refusal below is the identity rule's).
        if claim is _http_unregister:
            assert await _http_register(hub, hub.headers("b", "agent"), own) is None
        assert await claim(hub, hub.headers("b", role), own) is None
        for agent_id in ("a-ledger", "a-inv", "bank", "shared-inv"):
            refused = await claim(hub, hub.headers("b", role), agent_id)
            assert refused in IDENTITY_REFUSALS, f"{path}: tenant b on {agent_id!r}: {refused}"
        async with hub.http(None) as admin:
            rows = {row["agent_id"]: row for row in (await admin.get("/agents")).json()["agents"]}
        assert rows["a-ledger"].get("tenant") == rows["a-inv"].get("tenant") == "a"
        assert "tenant" not in rows["bank"] and "tenant" not in rows["shared-inv"]
        assert "bank" in hub.master.services.agents.known_ids(EVERY_TENANT)
    finally:
        with contextlib.suppress(Exception):
            await ledger.close()
        # HTTP agents are stored in Redis: the later tests of the suite must not find them.
        for agent_id in ("a-inv", "shared-inv", own):
            await _http_unregister(hub, hub.headers(None), agent_id)


# --------------------------------------------------------------------------- the run's verbs
#
# Every door's approval dialogue translates into the run's verb, ``RunVerbs.resume(run_id,
# [Approve...], principal)``: a person's "yes" through any door runs the held call once and the
# run goes on, its answer told through the door that decided.


@dataclass
class Dialogue:
    hub: Hub
    before: frozenset[str]
    """Tenant a's pending approvals before the run (the tests' Redis outlives each master)."""
    asked: list[str] = field(default_factory=list)
    """The approvals the run waited for, as the door's client saw them pending."""

    async def paused(self) -> None:
        self.asked.extend(x["approval_id"] for x in await _pending(self.hub, self.before))


Decide = Callable[[Dialogue], Awaitable[str]]
"""Start a run that waits for the transfer's approval through one door, approve it through the
same door's dialogue, and return what the door answered then (its raw text)."""


async def _decide_http(dialogue: Dialogue) -> str:
    async with dialogue.hub.http("a") as a:
        paused = (await a.post("/query", json={"query": "send 250 to bob"})).json()
        await dialogue.paused()
        [approval] = paused["approvals"]
        decided = await a.post(f"/approvals/{approval['approval_id']}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    return decided.text


async def _decide_mcp(dialogue: Dialogue) -> str:
    """The client's user is asked (elicitation) and says yes."""
    from mcp_types import ElicitRequestParams, ElicitResult

    async def yes(context: Any, params: ElicitRequestParams) -> ElicitResult:
        await dialogue.paused()
        return ElicitResult(action="accept", content={"decision": "approve"})

    async with (
        httpx2.AsyncClient(headers=dialogue.hub.headers("a"), timeout=DEADLINE) as http,
        McpClient(
            streamable_http_client(f"{dialogue.hub.master.base_url}/mcp", http_client=http),
            elicitation_callback=yes,
        ) as client,
    ):
        result = await client.call_tool("ask", {"query": "send 250 to bob"})
    assert result.is_error is False, result
    return json.dumps([block.model_dump() for block in result.content])


async def _decide_a2a(dialogue: Dialogue) -> str:
    """A message with the text ``approve`` on the task that waits."""

    async def send(message: dict[str, Any]) -> dict[str, Any]:
        request = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
        async with dialogue.hub.http("a") as a:
            body: dict[str, Any] = (await a.post("/a2a", json=request)).json()
        assert "result" in body, body
        return body["result"]

    def text(words: str, **more: str) -> dict[str, Any]:
        return {
            "role": "user",
            "messageId": uuid.uuid4().hex,
            "parts": [{"kind": "text", "text": words}],
            **more,
        }

    task = await send(text("send 250 to bob"))
    assert task["status"]["state"] == "input-required", task
    await dialogue.paused()
    done = await send(text("approve", taskId=task["id"], contextId=task["contextId"]))
    assert done["status"]["state"] == "completed", done
    return json.dumps(done)


async def _decide_agui(dialogue: Dialogue) -> str:
    """The run ends with an interrupt; the next input on the thread resumes it."""
    thread = str(uuid.uuid4())

    async def run(**more: Any) -> list[Any]:
        body = {"threadId": thread, "runId": uuid.uuid4().hex, "messages": [], **more}
        async with dialogue.hub.http("a") as a:
            response = await a.post("/ag-ui", json=body)
        assert response.status_code == 200, response.text
        blocks = [b for b in response.text.split("\n\n") if b.strip()]
        return [AG_UI_EVENT.validate_json(block.removeprefix("data: ")) for block in blocks]

    paused = await run(messages=[{"id": "m1", "role": "user", "content": "send 250 to bob"}])
    [interrupt] = paused[-1].outcome.interrupts
    await dialogue.paused()
    resumed = await run(
        resume=[{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]
    )
    assert resumed[-1].type.value == "RUN_FINISHED", resumed[-1]
    return json.dumps([event.model_dump(mode="json") for event in resumed])


async def _decide_responses(dialogue: Dialogue) -> str:
    """An ``mcp_approval_request`` output item, answered by an ``mcp_approval_response`` input item."""
    async with dialogue.hub.http("a") as a:
        first = (
            await a.post("/v1/responses", json={"model": "openagent", "input": "send 250 to bob"})
        ).json()
        await dialogue.paused()
        [request] = [item for item in first["output"] if item["type"] == "mcp_approval_request"]
        answer = {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}
        second = await a.post(
            "/v1/responses",
            json={"model": "openagent", "previous_response_id": first["id"], "input": [answer]},
        )
    assert second.status_code == 200, second.text
    return second.text


DECIDE: dict[str, Decide] = {
    "http": _decide_http,
    "mcp": _decide_mcp,
    "a2a": _decide_a2a,
    "agui": _decide_agui,
    "responses": _decide_responses,
}
NO_DIALOGUE = {"sse": "http", "websocket": "http", "openai": "http"}
"""Doors without an approval dialogue of their own: their runs' approvals are decided over HTTP."""


def test_the_approval_walk_covers_every_door() -> None:
    assert set(DECIDE) | set(NO_DIALOGUE) == set(DOORS) and not set(DECIDE) & set(NO_DIALOGUE)


@pytest.mark.parametrize("door", list(DECIDE))
async def test_an_approval_through_every_door_resumes_its_run_once(
    hub: Hub, llm: ScriptedOpenAIServer, door: str
) -> None:
    llm.add_tool_call("bank__transfer", PAYMENT)
    llm.add_text("Sent 250 to bob.")
    dialogue = Dialogue(hub, await _pending_ids(hub))

    told = await DECIDE[door](dialogue)

    assert "Sent 250 to bob." in told  # the resumed run's answer, through the door that decided
    assert hub.calls == [PAYMENT]  # the held call ran, once
    [approval_id] = dialogue.asked
    async with hub.http("a") as a:
        assert (await a.get(f"/approvals/{approval_id}")).json()["status"] == "approved"
        again = await a.post(f"/approvals/{approval_id}", json={"decision": "approve"})
    assert again.status_code == 409 and again.json()["error_code"] == "approval_decided"
    assert hub.calls == [PAYMENT]  # and never again


Pause = Callable[[httpx.AsyncClient], Awaitable[tuple[str, str]]]
"""Start a run on master A (through this client) that waits for the transfer's approval: ``(run
id, what the cancel names)``."""
Cancel = Callable[[InProcessMaster, httpx.AsyncClient, str], Awaitable[None]]
"""Cancel that run through master B (its base URL's client), by what the door names."""


async def _pause_query(on_a: httpx.AsyncClient) -> tuple[str, str]:
    paused = (await on_a.post("/query", json={"query": "send 250 to bob"})).json()
    assert paused["status"] == "awaiting_approval", paused
    return paused["run_id"], paused["run_id"]


async def _pause_a2a(on_a: httpx.AsyncClient) -> tuple[str, str]:
    message = {
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": "send 250 to bob"}],
    }
    request = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    task = (await on_a.post("/a2a", json=request)).json()["result"]
    assert task["status"]["state"] == "input-required", task
    return task["metadata"]["openagent_run_id"], task["id"]


async def _cancel_http(b: InProcessMaster, on_b: httpx.AsyncClient, run_id: str) -> None:
    cancelled = await on_b.delete(f"/runs/{run_id}")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled", cancelled.text


async def _cancel_websocket(b: InProcessMaster, on_b: httpx.AsyncClient, run_id: str) -> None:
    peer = await RawPeer.connect(
        b.ws_url, additional_headers={"Authorization": on_b.headers["Authorization"]}
    )
    try:
        await peer.register(f"canceller-{uuid.uuid4().hex[:8]}", role="query")
        await peer.send({"type": "cancel", "run_id": run_id})
        while (frame := await peer.recv(timeout=DEADLINE))["type"] not in ("cancel_result", "error"):
            pass
    finally:
        await peer.close()
    assert frame["type"] == "cancel_result" and frame["state"] == "cancelled", frame


async def _cancel_a2a(b: InProcessMaster, on_b: httpx.AsyncClient, task_id: str) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": task_id}}
    body = (await on_b.post("/a2a", json=request)).json()
    assert body.get("result", {}).get("status", {}).get("state") == "canceled", body


CANCEL_ON_B: dict[str, tuple[Pause, Cancel]] = {
    "http DELETE /runs": (_pause_query, _cancel_http),
    "websocket cancel frame": (_pause_query, _cancel_websocket),
    "a2a CancelTask": (_pause_a2a, _cancel_a2a),
}
"""The doors that cancel a run by a name any master knows (the MCP and Responses cancels name a
call or a response of their own master: ``test_mcp_server.py``, ``test_openai_responses.py``)."""


@pytest.mark.parametrize("door", list(CANCEL_ON_B))
async def test_a_run_held_by_master_a_is_cancelled_through_master_b_and_then_resumes_through_no_door(
    llm: ScriptedOpenAIServer, door: str
) -> None:
    """Two masters on one Redis: a run paused on A is cancelled through B; its approval is
    withdrawn, and neither a decision (on A) nor a resume by id (on B) runs it."""
    calls: list[dict[str, Any]] = []

    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> Any:
        calls.append(arguments)
        return {"sent": arguments}

    settings: dict[str, Any] = {
        "openai_base_url": llm.base_url,
        "openai_api_key": "scripted",
        "openagent_api_key": ADMIN_KEY,
    }
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with (
        in_process_master(openagent_master_id="verbs-a", **settings) as a,
        in_process_master(openagent_master_id="verbs-b", **settings) as b,
        OrchestratorActionAgent(
            "bank", [TRANSFER], handler, config=AgentConfig(master_ws=a.ws_url, api_key=ADMIN_KEY)
        ),
        httpx.AsyncClient(base_url=a.base_url, headers=headers, timeout=DEADLINE) as on_a,
        httpx.AsyncClient(base_url=b.base_url, headers=headers, timeout=DEADLINE) as on_b,
    ):
        async with asyncio.timeout(DEADLINE):
            while "bank" not in a.services.agents.known_ids(EVERY_TENANT):
                await asyncio.sleep(0.01)
        pause, cancel = CANCEL_ON_B[door]
        llm.add_tool_call("bank__transfer", PAYMENT)
        before = {x["approval_id"] for x in (await on_a.get("/approvals")).json()["approvals"]}
        run_id, name = await pause(on_a)
        [approval] = [
            x for x in (await on_a.get("/approvals")).json()["approvals"] if x["approval_id"] not in before
        ]

        await cancel(b, on_b, name)

        decided = await on_a.post(f"/approvals/{approval['approval_id']}", json={"decision": "approve"})
        assert decided.status_code == 409 and decided.json()["error_code"] == "approval_decided", decided.text
        assert decided.json()["detail"]["approval"]["status"] == "rejected"  # withdrawn by the cancel
        resumed = await on_b.post(f"/runs/{run_id}/resume", json={})
        assert resumed.status_code == 409 and resumed.json()["error_code"] == "run_not_resumable", (
            resumed.text
        )
        assert (await on_a.get(f"/runs/{run_id}")).json()["state"] == "cancelled"
    assert calls == []
