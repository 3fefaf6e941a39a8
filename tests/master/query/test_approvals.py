"""Human approval of tool calls, through the real app: a real master (lifespan, Redis, uvicorn on
loopback), the scripted LLM, an SDK WebSocket agent with a ``transfer`` tool that requires
approval and a harmless ``balance`` tool, and ``httpx`` as the person deciding."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from master.orchestration.tool_runs import ToolRunner
from master.storage.redis_keys import APPROVALS_EXPIRING_KEY
from openagent import OrchestratorActionAgent, ToolSchema
from openagent.config import ClientConfig
from openagent.testing import ScriptedOpenAIServer
from tests.factories import EVERY_TENANT, InProcessMaster, free_port, in_process_master

KEY = "approvals-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}

TRANSFER = ToolSchema(
    name="transfer",
    description="Move money",
    parameters={
        "type": "object",
        "properties": {"to": {"type": "string"}, "amount": {"type": "number", "minimum": 0}},
        "required": ["to", "amount"],
    },
    requires_approval=True,
)
BALANCE = ToolSchema(
    name="balance",
    description="Read the balance",
    parameters={"type": "object", "properties": {}},
)
DELETE = ToolSchema(
    name="delete_account", description="Close an account", parameters={"type": "object", "properties": {}}
)


@dataclass
class Bank:
    master: InProcessMaster
    llm: ScriptedOpenAIServer
    calls: list[tuple[str, dict[str, Any]]]
    http: httpx.AsyncClient

    async def query(self, **body: Any) -> dict[str, Any]:
        response = await self.http.post("/query", json={"query": "pay Bob", **body})
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def decide(self, approval_id: str, **body: Any) -> httpx.Response:
        return await self.http.post(f"/approvals/{approval_id}", json=body)


@asynccontextmanager
async def bank(llm: ScriptedOpenAIServer, *, port: int | None = None, **settings: Any) -> AsyncIterator[Bank]:
    calls: list[tuple[str, dict[str, Any]]] = []

    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> dict[str, Any]:
        calls.append((tool_name, arguments))
        return {"done": tool_name, "arguments": arguments}

    async with in_process_master(
        port=port, openai_base_url=llm.base_url, openai_api_key="scripted", openagent_api_key=KEY, **settings
    ) as master:
        config = ClientConfig(master_ws=master.ws_url, api_key=KEY)
        async with OrchestratorActionAgent("bank", [TRANSFER, BALANCE, DELETE], handler, config=config):
            async with asyncio.timeout(30):
                while "bank" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            async with httpx.AsyncClient(base_url=master.base_url, headers=HEADERS, timeout=60) as http:
                yield Bank(master, llm, calls, http)


@pytest.fixture
async def hub(llm: ScriptedOpenAIServer) -> AsyncIterator[Bank]:
    async with bank(llm) as b:
        yield b


async def _due_now(redis_client: aioredis.Redis, approval_id: str) -> None:
    """Put the approval's place on the expiry sweep's list in the past, so the sweep's next pass
    finds it overdue (in place of a short TTL in real time, which a busy machine outruns; moving
    the store's clock instead would make other tests' pending approvals in this Redis due too)."""
    await redis_client.zadd(APPROVALS_EXPIRING_KEY, {approval_id: 0})


def _pay_and_read(llm: ScriptedOpenAIServer) -> None:
    llm.add_tool_calls([("bank__transfer", {"to": "bob", "amount": 10}), ("bank__balance", {})])


def _tool_messages(request: dict[str, Any]) -> dict[str, str]:
    names = {
        call["id"]: call["function"]["name"]
        for message in request["messages"]
        for call in message.get("tool_calls") or []
    }
    return {names[m["tool_call_id"]]: m["content"] for m in request["messages"] if m.get("role") == "tool"}


async def _paused(hub: Bank) -> dict[str, Any]:
    _pay_and_read(hub.llm)
    paused = await hub.query()
    assert paused["status"] == "awaiting_approval" and paused["success"] is True
    return paused


async def test_a_call_needing_approval_waits_while_the_harmless_one_runs(hub: Bank) -> None:
    paused = await _paused(hub)
    assert hub.calls == [("balance", {})]  # the transfer did not run
    waiting = (await hub.http.get(f"/runs/{paused['run_id']}")).json()
    assert waiting["state"] == "awaiting_approval"
    resume = await hub.http.post(f"/runs/{paused['run_id']}/resume", json={})
    assert resume.status_code == 409 and "POST /approvals/" in resume.json()["detail"]
    [approval] = paused["approvals"]
    assert approval["approval_id"] in paused["answer"]  # the answer says what waits
    assert approval["agent_id"] == "bank" and approval["tool_name"] == "transfer"
    assert approval["arguments"] == {"to": "bob", "amount": 10} and approval["status"] == "pending"
    assert approval["expires_at"] - approval["created_at"] == pytest.approx(86400)
    listed = (await hub.http.get("/approvals", params={"session_id": paused["session_id"]})).json()
    assert [a["approval_id"] for a in listed["approvals"]] == [approval["approval_id"]]
    one = (await hub.http.get(f"/approvals/{approval['approval_id']}")).json()
    assert one["status"] == "pending"

    hub.llm.add_text("Paid Bob 10.")
    decided = await hub.decide(approval["approval_id"], decision="approve")
    assert decided.status_code == 200, decided.text
    result = decided.json()
    assert result["status"] == "completed" and result["answer"] == "Paid Bob 10."
    assert result["agents_used"] == [{"agent_id": "bank", "tool_name": "transfer"}]
    assert result["session_id"] == paused["session_id"]
    assert hub.calls == [("balance", {}), ("transfer", {"to": "bob", "amount": 10})]
    told = _tool_messages(hub.llm.requests[-1])
    assert '"done": "transfer"' in told["bank__transfer"] and '"done": "balance"' in told["bank__balance"]
    assert result["run_id"] == paused["run_id"]  # one run, paused and resumed
    run = (await hub.http.get(f"/runs/{paused['run_id']}")).json()
    assert run["state"] == "completed" and run["unknown"] == []
    assert [call["tool_name"] for call in run["completed"]] == ["balance", "transfer"]
    after = (await hub.http.get(f"/approvals/{approval['approval_id']}")).json()
    assert after["status"] == "approved" and after["decided_at"] is not None
    metrics = (await hub.http.get("/metrics")).text
    assert 'openagent_approvals_total{outcome="approved"} 1.0' in metrics


async def test_without_a_session_the_list_has_the_pending_approvals_of_every_session(hub: Bank) -> None:
    first = await _paused(hub)
    second = await _paused(hub)
    assert first["session_id"] != second["session_id"]
    ids = [first["approvals"][0]["approval_id"], second["approvals"][0]["approval_id"]]
    sessions = {first["session_id"], second["session_id"]}

    async def listed() -> list[dict[str, Any]]:  # (other tests' runs may still be pending)
        rows = (await hub.http.get("/approvals")).json()["approvals"]
        return [a for a in rows if a["session_id"] in sessions]

    assert [a["approval_id"] for a in await listed()] == ids
    assert {a["status"] for a in await listed()} == {"pending"}
    hub.llm.add_text("I did not pay Bob.")
    assert (await hub.decide(ids[0], decision="reject")).status_code == 200
    assert [a["approval_id"] for a in await listed()] == ids[1:]  # decided ones leave the list


async def test_a_rejected_call_is_not_run_and_the_model_hears_why(hub: Bank) -> None:
    paused = await _paused(hub)
    hub.llm.add_text("I did not pay Bob.")
    decided = await hub.decide(paused["approvals"][0]["approval_id"], decision="reject", message="too much")
    assert decided.status_code == 200, decided.text
    assert decided.json()["answer"] == "I did not pay Bob."
    assert hub.calls == [("balance", {})]
    told = _tool_messages(hub.llm.requests[-1])["bank__transfer"]
    assert "refused" in told and "too much" in told


async def test_edited_arguments_run_and_the_model_is_told(hub: Bank) -> None:
    paused = await _paused(hub)
    hub.llm.add_text("Paid Bob 5.")
    decided = await hub.decide(
        paused["approvals"][0]["approval_id"], decision="approve", arguments={"to": "bob", "amount": 5}
    )
    assert decided.status_code == 200, decided.text
    assert hub.calls[-1] == ("transfer", {"to": "bob", "amount": 5})
    told = _tool_messages(hub.llm.requests[-1])["bank__transfer"]
    assert "edited arguments" in told and '"amount": 5' in told
    approval = (await hub.http.get(f"/approvals/{paused['approvals'][0]['approval_id']}")).json()
    assert approval["status"] == "approved" and approval["edited_arguments"] == {"to": "bob", "amount": 5}


async def test_an_invalid_edit_is_refused_naming_the_field_and_nothing_is_decided(hub: Bank) -> None:
    paused = await _paused(hub)
    approval_id = paused["approvals"][0]["approval_id"]
    refused = await hub.decide(approval_id, decision="approve", arguments={"to": "bob", "amount": -3})
    assert refused.status_code == 422
    assert refused.json()["error_code"] == "validation_error" and "amount" in refused.json()["detail"]
    assert (await hub.http.get(f"/approvals/{approval_id}")).json()["status"] == "pending"
    assert hub.calls == [("balance", {})]


async def test_two_deciders_racing_one_wins_the_other_gets_409(hub: Bank) -> None:
    paused = await _paused(hub)
    approval_id = paused["approvals"][0]["approval_id"]
    hub.llm.add_text("Done.")
    hub.llm.add_text("Done again (must not be asked).")
    first, second = await asyncio.gather(
        hub.decide(approval_id, decision="approve"), hub.decide(approval_id, decision="reject")
    )
    statuses = sorted([first.status_code, second.status_code])
    assert statuses == [200, 409], (first.text, second.text)
    loser = first if first.status_code == 409 else second
    won = (await hub.http.get(f"/approvals/{approval_id}")).json()["status"]
    assert loser.json()["error_code"] == "approval_decided"
    assert loser.json()["detail"]["approval"]["status"] == won
    transfers = [call for call in hub.calls if call[0] == "transfer"]
    assert len(transfers) == (1 if won == "approved" else 0)


async def test_an_approval_is_decided_on_a_fresh_master_after_the_first_stopped(
    llm: ScriptedOpenAIServer,
) -> None:
    port = free_port()
    async with bank(llm, port=port) as first:
        paused = await _paused(first)
    llm.add_text("Paid Bob 10, later.")
    async with bank(llm, port=port) as second:
        decided = await second.decide(paused["approvals"][0]["approval_id"], decision="approve")
        assert decided.status_code == 200, decided.text
        assert decided.json()["answer"] == "Paid Bob 10, later."
        assert second.calls == [("transfer", {"to": "bob", "amount": 10})]


async def test_policy_settings_hold_and_exempt_tools(llm: ScriptedOpenAIServer) -> None:
    async with bank(
        llm, openagent_approval_tools="bank__*", openagent_approval_exempt="bank__balance,bank__transfer"
    ) as b:
        llm.add_tool_calls(
            [
                ("bank__delete_account", {}),
                ("bank__balance", {}),
                ("bank__transfer", {"to": "x", "amount": 1}),
            ]
        )
        paused = await b.query()
        assert paused["status"] == "awaiting_approval"
        assert [a["tool_name"] for a in paused["approvals"]] == ["delete_account"]
        assert sorted(name for name, _ in b.calls) == ["balance", "transfer"]


async def test_a_run_none_of_whose_tools_can_wait_asks_no_verdict(
    llm: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every offered tool is exempt, and no agent can join mid-run: the run's calls go out
    without the approval check (which parses and validates each call once more), and run."""
    asked: list[str] = []
    verdict = ToolRunner.verdict

    def counted(self: ToolRunner, toolbox: Any, call: Any, hooks: Any) -> Any:
        asked.append(call.name)
        return verdict(self, toolbox, call, hooks)

    monkeypatch.setattr(ToolRunner, "verdict", counted)
    async with bank(llm, openagent_approval_exempt="bank__*") as b:
        llm.add_tool_calls([("bank__balance", {}), ("bank__transfer", {"to": "x", "amount": 1})])
        llm.add_text("Done.")
        result = await b.query(approval="always")
        assert result["status"] == "completed" and not result.get("approvals")
        assert sorted(name for name, _ in b.calls) == ["balance", "transfer"]
        assert asked == []
    async with bank(llm) as b:
        llm.add_tool_call("bank__balance", {})
        llm.add_text("Done.")
        assert (await b.query())["status"] == "completed"
        assert asked == ["bank__balance"]  # transfer could wait: every call is asked about


async def test_approval_never_refuses_a_tool_that_requires_it(hub: Bank) -> None:
    _pay_and_read(hub.llm)
    hub.llm.add_text("I could not pay Bob.")
    result = await hub.query(approval="never")
    assert result["status"] == "completed" and result["answer"] == "I could not pay Bob."
    assert hub.calls == [("balance", {})]
    told = _tool_messages(hub.llm.requests[-1])["bank__transfer"]
    assert "requires a person's approval" in told


async def test_approval_always_holds_every_call(hub: Bank) -> None:
    hub.llm.add_tool_call("bank__balance", {})
    paused = await hub.query(approval="always")
    assert [a["tool_name"] for a in paused["approvals"]] == ["balance"] and hub.calls == []


async def test_a_round_of_two_approvals_resumes_after_the_last(hub: Bank) -> None:
    hub.llm.add_tool_calls(
        [("bank__transfer", {"to": "a", "amount": 1}), ("bank__transfer", {"to": "b", "amount": 2})]
    )
    paused = await hub.query()
    first, second = (a["approval_id"] for a in paused["approvals"])
    waiting = await hub.decide(first, decision="approve")
    assert waiting.status_code == 200 and waiting.json()["status"] == "awaiting_approval"
    assert [a["status"] for a in waiting.json()["approvals"]] == ["approved", "pending"]
    assert hub.calls == []
    hub.llm.add_text("Paid a, not b.")
    done = await hub.decide(second, decision="reject")
    assert done.json()["answer"] == "Paid a, not b." and hub.calls == [("transfer", {"to": "a", "amount": 1})]


async def test_sse_sends_approval_required(hub: Bank) -> None:
    _pay_and_read(hub.llm)
    events: list[tuple[str, Any]] = []
    async with hub.http.stream("POST", "/query", json={"query": "pay Bob", "stream": True}) as response:
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                events.append((event, json.loads(line[6:])))
    names = [name for name, _ in events]
    assert "approval_required" in names and names[-1] == "query_result"
    required = dict(events)["approval_required"]
    assert required["tool_name"] == "transfer" and required["status"] == "pending"
    assert dict(events)["query_result"]["approvals"][0]["approval_id"] == required["approval_id"]


async def test_an_expired_approval_is_expired_not_rejected(
    llm: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with bank(llm) as b:
        paused = await _paused(b)
        approval_id = paused["approvals"][0]["approval_id"]
        store = b.master.services.queries.approvals
        assert store is not None
        real = store.clock
        later: Callable[[], float] = lambda: real() + 86400 + 60  # noqa: E731
        monkeypatch.setattr(store, "clock", later)
        llm.add_text("No one approved the transfer in time.")
        refused = await b.decide(approval_id, decision="approve")
        assert refused.status_code == 409
        assert refused.json()["detail"]["approval"]["status"] == "expired"
        assert (await b.http.get(f"/approvals/{approval_id}")).json()["status"] == "expired"
        told = _tool_messages(llm.requests[-1])["bank__transfer"]
        assert "No one decided" in told
        assert b.calls == [("balance", {})]
        assert 'openagent_approvals_total{outcome="expired"} 1.0' in (await b.http.get("/metrics")).text


async def test_a_failed_resume_keeps_the_decision_and_resumes_again_without_rerunning(hub: Bank) -> None:
    paused = await _paused(hub)
    approval_id = paused["approvals"][0]["approval_id"]
    hub.llm.add_error(400, "the provider is down")
    failed = await hub.decide(approval_id, decision="approve")
    assert failed.status_code >= 400 and failed.json()["success"] is False, failed.text
    assert (await hub.http.get(f"/approvals/{approval_id}")).json()["status"] == "approved"
    assert hub.calls == [("balance", {}), ("transfer", {"to": "bob", "amount": 10})]
    again = await hub.decide(approval_id, decision="approve")
    assert again.status_code == 409  # decided already: resume instead
    hub.llm.add_text("Paid Bob 10.")
    resumed = await hub.http.post(f"/approvals/{approval_id}/resume")
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["answer"] == "Paid Bob 10."
    assert hub.calls == [("balance", {}), ("transfer", {"to": "bob", "amount": 10})]  # not run again
    told = _tool_messages(hub.llm.requests[-1])["bank__transfer"]
    assert '"done": "transfer"' in told


async def test_the_last_two_decisions_racing_resume_the_run_once(hub: Bank) -> None:
    hub.llm.add_tool_calls(
        [("bank__transfer", {"to": "a", "amount": 1}), ("bank__transfer", {"to": "b", "amount": 2})]
    )
    paused = await hub.query()
    first, second = (a["approval_id"] for a in paused["approvals"])
    hub.llm.add_text("Paid a and b.")
    answers = await asyncio.gather(
        hub.decide(first, decision="approve"), hub.decide(second, decision="approve")
    )
    assert any(a.status_code == 200 and a.json().get("answer") == "Paid a and b." for a in answers), [
        a.text for a in answers
    ]
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert sorted(args["to"] for name, args in hub.calls if name == "transfer") == ["a", "b"]
    statuses = [(await hub.http.get(f"/approvals/{i}")).json()["status"] for i in (first, second)]
    assert statuses == ["approved", "approved"]


async def test_remember_session_approves_the_tool_for_the_rest_of_the_session(hub: Bank) -> None:
    paused = await _paused(hub)
    session_id = paused["session_id"]
    hub.llm.add_text("Paid Bob 10.")
    decided = await hub.decide(paused["approvals"][0]["approval_id"], decision="approve", remember="session")
    assert decided.status_code == 200, decided.text
    assert decided.json()["answer"] == "Paid Bob 10."

    hub.llm.add_tool_call("bank__transfer", {"to": "carol", "amount": 3})
    hub.llm.add_text("Paid Carol 3.")
    again = await hub.query(session_id=session_id, query="pay Carol")
    assert again["status"] == "completed" and again["answer"] == "Paid Carol 3.", again
    assert hub.calls[-1] == ("transfer", {"to": "carol", "amount": 3})

    hub.llm.add_tool_call("bank__delete_account", {})  # another tool of the session still waits
    other_tool = await hub.query(session_id=session_id, query="close it", approval="always")
    assert [a["tool_name"] for a in other_tool["approvals"]] == ["delete_account"]

    hub.llm.add_tool_call("bank__transfer", {"to": "dan", "amount": 1})
    elsewhere = await hub.query(query="pay Dan")  # a new session: the transfer waits again
    assert elsewhere["status"] == "awaiting_approval" and elsewhere["session_id"] != session_id


async def test_remember_session_approves_the_rounds_other_calls_of_the_tool(hub: Bank) -> None:
    hub.llm.add_tool_calls(
        [("bank__transfer", {"to": "a", "amount": 1}), ("bank__transfer", {"to": "b", "amount": 2})]
    )
    paused = await hub.query()
    first, second = (a["approval_id"] for a in paused["approvals"])
    hub.llm.add_text("Paid a and b.")
    done = await hub.decide(first, decision="approve", remember="session")
    assert done.status_code == 200 and done.json()["answer"] == "Paid a and b.", done.text
    assert sorted(args["to"] for name, args in hub.calls if name == "transfer") == ["a", "b"]
    assert (await hub.http.get(f"/approvals/{second}")).json()["status"] == "approved"


async def test_remember_session_never_decides_the_waiting_calls_of_another_session(hub: Bank) -> None:
    hub.llm.add_tool_call("bank__transfer", {"to": "mine", "amount": 1})
    mine = await hub.query()
    hub.llm.add_tool_call("bank__transfer", {"to": "theirs", "amount": 2})
    theirs = await hub.query()  # another session, the same tool waiting
    assert mine["session_id"] != theirs["session_id"]
    [their_approval] = theirs["approvals"]

    hub.llm.add_text("Paid mine.")
    done = await hub.decide(mine["approvals"][0]["approval_id"], decision="approve", remember="session")
    assert done.status_code == 200 and done.json()["answer"] == "Paid mine.", done.text
    assert (await hub.http.get(f"/approvals/{their_approval['approval_id']}")).json()["status"] == "pending"
    assert (await hub.http.get(f"/runs/{theirs['run_id']}")).json()["state"] == "awaiting_approval"
    assert [args["to"] for name, args in hub.calls if name == "transfer"] == ["mine"]

    hub.llm.add_text("Not paid.")
    rejected = await hub.decide(their_approval["approval_id"], decision="reject", message="no")
    assert rejected.status_code == 200, rejected.text
    assert [args["to"] for name, args in hub.calls if name == "transfer"] == ["mine"]


async def test_remember_goes_with_approve_only(hub: Bank) -> None:
    paused = await _paused(hub)
    approval_id = paused["approvals"][0]["approval_id"]
    refused = await hub.decide(approval_id, decision="reject", remember="session")
    assert refused.status_code == 422 and "remember" in refused.text
    refused = await hub.decide(approval_id, decision="approve", remember="forever")
    assert refused.status_code == 422 and "remember" in refused.text
    assert (await hub.http.get(f"/approvals/{approval_id}")).json()["status"] == "pending"


def _sample(metrics: str, name: str, outcome: str) -> float:
    prefix = f'{name}{{outcome="{outcome}"}} '
    found = [line for line in metrics.splitlines() if line.startswith(prefix)]
    return float(found[0][len(prefix) :]) if found else 0.0


async def test_metrics_count_each_outcome_and_the_time_to_decision(hub: Bank) -> None:
    for decision, extra, outcome in (
        ("approve", {}, "approved"),
        ("approve", {"arguments": {"to": "bob", "amount": 1}}, "edited"),
        ("reject", {"message": "no"}, "rejected"),
    ):
        paused = await _paused(hub)
        hub.llm.add_text("Done.")
        decided = await hub.decide(paused["approvals"][0]["approval_id"], decision=decision, **extra)
        assert decided.status_code == 200, decided.text
        metrics = (await hub.http.get("/metrics")).text
        assert _sample(metrics, "openagent_approvals_total", outcome) == 1.0, metrics
        assert _sample(metrics, "openagent_approval_decision_seconds_count", outcome) == 1.0
        assert _sample(metrics, "openagent_approval_decision_seconds_sum", outcome) >= 0.0
    assert _sample(metrics, "openagent_approvals_total", "approved") == 1.0  # an edit is not counted twice


async def test_the_expiry_sweep_ends_the_run_without_anyone_reading(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    async with bank(llm, openagent_approval_sweep_seconds=0.05) as b:
        llm.add_tool_call("bank__transfer", {"to": "bob", "amount": 10})
        llm.add_text("No one approved the transfer in time.")
        paused = await b.query()
        approval_id = paused["approvals"][0]["approval_id"]
        await _due_now(redis_client, approval_id)
        async with asyncio.timeout(30):  # the sweep marks it, resumes the run, the model answers
            while len(llm.requests) < 2:
                await asyncio.sleep(0.02)
        assert "No one decided" in _tool_messages(llm.requests[-1])["bank__transfer"]
        approval = (await b.http.get(f"/approvals/{approval_id}")).json()
        assert approval["status"] == "expired" and approval["decided_at"] is not None
        assert b.calls == []
        async with asyncio.timeout(30):
            while await b.master.services.queries.held_run(paused["session_id"], EVERY_TENANT) != (None, []):
                await asyncio.sleep(0.02)
        metrics = (await b.http.get("/metrics")).text
        assert _sample(metrics, "openagent_approvals_total", "expired") == 1.0
        assert _sample(metrics, "openagent_approval_decision_seconds_count", "expired") == 1.0
        late = await b.decide(approval_id, decision="approve")
        assert late.status_code == 409 and late.json()["detail"]["approval"]["status"] == "expired"


async def test_two_masters_sweeping_expire_an_approval_once(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    """Both masters of one Redis sweep; one wins the approval (SET NX), so it is counted and its
    run resumed once."""
    quick = {"openagent_approval_sweep_seconds": 0.02}
    async with (
        bank(llm, **quick) as a,
        in_process_master(
            openai_base_url=llm.base_url, openai_api_key="scripted", openagent_api_key=KEY, **quick
        ) as b,
    ):
        llm.add_tool_call("bank__transfer", {"to": "bob", "amount": 10})
        llm.add_text("No one approved the transfer in time.")
        paused = await a.query()
        approval_id = paused["approvals"][0]["approval_id"]
        await _due_now(redis_client, approval_id)
        store = a.master.services.queries.approvals
        assert store is not None
        async with asyncio.timeout(30):  # decided, off the sweep's list, its run resumed
            while (
                len(llm.requests) < 2
                or approval_id in await store.overdue()
                or (await store.record(approval_id, EVERY_TENANT) or {}).get("decided_at") is None
                or await a.master.services.queries.held_run(paused["session_id"], EVERY_TENANT) != (None, [])
            ):
                await asyncio.sleep(0.02)
        async with httpx.AsyncClient(base_url=b.base_url, headers=HEADERS) as other:
            counts = [
                _sample((await client.get("/metrics")).text, "openagent_approvals_total", "expired")
                for client in (a.http, other)
            ]
        assert sorted(counts) == [0.0, 1.0]
        assert len(llm.requests) == 2 and a.calls == []


async def test_the_sweep_resumes_a_run_it_could_not_admit_at_its_next_pass(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    async with bank(llm, openagent_approval_sweep_seconds=0.02, openagent_max_queries_in_flight=1) as b:
        llm.add_tool_call("bank__transfer", {"to": "bob", "amount": 10})
        llm.add_text("No one approved the transfer in time.")
        paused = await b.query()
        store = b.master.services.queries.approvals
        assert store is not None
        admission = b.master.services.entry.admission
        admission.enter()  # the master is full: the sweep's resume is not admitted
        try:
            await _due_now(redis_client, paused["approvals"][0]["approval_id"])
            async with asyncio.timeout(30):
                while (await store.record(paused["approvals"][0]["approval_id"], EVERY_TENANT) or {}).get(
                    "decided_at"
                ) is None:
                    await asyncio.sleep(0.02)
            assert len(llm.requests) == 1
        finally:
            admission.leave()
        async with asyncio.timeout(30):  # room again: a later pass resumes it
            while len(llm.requests) < 2:
                await asyncio.sleep(0.02)
        assert "No one decided" in _tool_messages(llm.requests[-1])["bank__transfer"]


async def test_an_approved_call_cut_off_in_flight_is_unknown_on_resume_never_rerun(
    llm: ScriptedOpenAIServer,
) -> None:
    """The resume stops while the approved call is in flight (its runs cancelled, as when the
    master stops): the call is recorded unknown, and the next resume does not send it again."""
    transferring, release = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> dict[str, Any]:
        calls.append(tool_name)
        if tool_name == "transfer":
            transferring.set()
            await release.wait()
        return {"done": tool_name}

    async with in_process_master(
        openai_base_url=llm.base_url, openai_api_key="scripted", openagent_api_key=KEY
    ) as master:
        config = ClientConfig(master_ws=master.ws_url, api_key=KEY)
        async with (
            OrchestratorActionAgent("bank", [TRANSFER, BALANCE], handler, config=config),
            httpx.AsyncClient(base_url=master.base_url, headers=HEADERS, timeout=60) as http,
        ):
            async with asyncio.timeout(30):
                while "bank" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            llm.add_tool_call("bank__transfer", {"to": "bob", "amount": 10})
            paused = (await http.post("/query", json={"query": "pay Bob"})).json()
            approval_id = paused["approvals"][0]["approval_id"]
            deciding = asyncio.create_task(
                http.post(f"/approvals/{approval_id}", json={"decision": "approve"})
            )
            async with asyncio.timeout(60):
                await transferring.wait()
            await master.services.entry.aclose()  # the runs in flight are cancelled
            await asyncio.gather(deciding, return_exceptions=True)
            release.set()
            llm.add_text("I do not know whether Bob was paid.")
            resumed = await http.post(f"/approvals/{approval_id}/resume")
            assert resumed.status_code == 200, resumed.text
            assert resumed.json()["answer"] == "I do not know whether Bob was paid."
            told = _tool_messages(llm.requests[-1])["bank__transfer"]
            assert "unknown" in told
            assert calls == ["transfer"]  # sent once
            record = (await http.get(f"/runs/{paused['run_id']}")).json()
            assert record["state"] == "completed"
            assert [call["name"] for call in record["unknown"]] == ["bank__transfer"]
