"""Auto mode as a coordinator of roles, through the real app and the scripted LLM: the plan, each
sub-task's execution and review in ``GET /runs/{run_id}`` and in the SSE stream; ``needs_retry``
re-runs a sub-task once; a critic's disagreement waits for a person (``POST /approvals``); a run
whose master is killed mid-plan resumes on another master without re-running a passed sub-task."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from openagent import OrchestratorActionAgent
from openagent.config import ClientConfig
from openagent.testing import ScriptedOpenAIServer
from tests.factories import EVERY_TENANT, in_process_master
from tests.master.query.test_runs import (
    HEADERS,
    KEY,
    PAY,
    Works,
    _wait_for,
    _wait_for_agent,
    kill,
    master_a_and_b,
    works_agent,
)

PLAN = {
    "subtasks": [
        {"task": "do step one", "criteria": ["step 1 done"]},
        {"task": "do step two", "criteria": ["step 2 done"]},
    ]
}


def plan(llm: ScriptedOpenAIServer, subtasks: dict[str, Any] = PLAN) -> None:
    llm.add_tool_call("submit_plan", subtasks)


def review(llm: ScriptedOpenAIServer, verdict: str, reason: str = "") -> None:
    llm.add_tool_call("submit_review", {"verdict": verdict, "reason": reason or verdict})


def execute(llm: ScriptedOpenAIServer, n: int | None, answer: str) -> None:
    if n is not None:
        llm.add_tool_call("works__step", {"n": n})
    llm.add_text(answer)


ROLES = ["planner", "executor", "reviewer"]


@pytest.fixture
async def works(llm: ScriptedOpenAIServer) -> AsyncIterator[Works]:
    """A master with the ``works`` agent (as in the runs tests)."""
    async with in_process_master(
        openai_base_url=llm.base_url, openai_api_key="scripted", openagent_api_key=KEY
    ) as master:
        calls: list[tuple[str, dict[str, Any]]] = []
        async with works_agent(master.ws_url, calls):
            async with asyncio.timeout(30):
                while "works" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            async with httpx.AsyncClient(base_url=master.base_url, headers=HEADERS, timeout=60) as http:
                yield Works(master, http, calls)


async def test_plan_execute_review_in_the_stream_and_the_record_with_one_retry(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    plan(llm)
    execute(llm, 1, "Step one is done.")
    review(llm, "pass", "step 1 was done")
    execute(llm, 2, "Step two, first try.")
    review(llm, "needs_retry", "say what step 2 returned")
    execute(llm, None, "Step two returned n=2.")
    review(llm, "pass", "now it says")
    body = {"query": "do the work", "auto_mode": True, "roles": ROLES, "stream": True}
    async with works.http.stream("POST", "/query", json=body) as response:
        run_id = response.headers["OpenAgent-Run-Id"]
        events: list[tuple[str, dict[str, Any]]] = []
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[6:])))
    flow = [
        (n, d.get("index"), d.get("verdict") or d.get("attempt"))
        for n, d in events
        if n in ("plan", "subtask_started", "verdict")
    ]
    assert flow == [
        ("plan", None, None),
        ("subtask_started", 0, 1),
        ("verdict", 0, "pass"),
        ("subtask_started", 1, 1),
        ("verdict", 1, "needs_retry"),
        ("subtask_started", 1, 2),
        ("verdict", 1, "pass"),
    ]
    assert events[0][1]["subtasks"][1] == {"task": "do step two", "criteria": ["step 2 done"]}
    result = events[-1][1]
    assert events[-1][0] == "query_result" and result["status"] == "completed", result
    assert "Step one is done." in result["answer"] and "Step two returned n=2." in result["answer"]
    assert works.calls == [("step", {"n": 1}), ("step", {"n": 2})]

    record = (await works.http.get(f"/runs/{run_id}")).json()
    assert record["state"] == "completed"
    roles = record["roles"]
    assert roles["phase"] == "complete"
    assert [(s["task"], s["status"], s["attempts"]) for s in roles["subtasks"]] == [
        ("do step one", "passed", 1),
        ("do step two", "passed", 2),
    ]
    assert [(v["role"], v["verdict"], v["attempt"]) for v in roles["subtasks"][1]["verdicts"]] == [
        ("reviewer", "needs_retry", 1),
        ("reviewer", "pass", 2),
    ]
    # The planner and the reviewer are offered their tool only; the executor the agents' tools.
    offered = [[t["function"]["name"] for t in r.get("tools") or []] for r in llm.requests]
    assert offered[0] == ["submit_plan"] and offered[3] == ["submit_review"]
    assert "works__step" in offered[1]
    retry = llm.requests[-2]["messages"][-1]["content"]
    assert "say what step 2 returned" in retry  # the second attempt is told why


async def test_a_second_needs_retry_or_a_first_fail_blocks_the_run(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    plan(llm)
    execute(llm, None, "Tried.")
    review(llm, "needs_retry", "not yet")
    execute(llm, None, "Tried again.")
    review(llm, "needs_retry", "still not")
    blocked = await works.query(auto_mode=True, roles=ROLES)
    assert blocked["status"] == "stopped" and blocked["stopped_by"] == "blocked"
    assert "still needs a retry" in blocked["answer"] and "still not" in blocked["answer"]
    record = (await works.http.get(f"/runs/{blocked['run_id']}")).json()
    assert record["roles"]["phase"] == "blocked" and record["resumable"] is False
    assert record["roles"]["subtasks"][0]["status"] == "blocked"
    assert record["roles"]["subtasks"][1]["status"] == "pending"  # never started

    plan(llm)
    execute(llm, None, "Cannot.")
    review(llm, "fail", "there is no such step")
    failed = await works.query(auto_mode=True, roles=ROLES)
    assert failed["stopped_by"] == "blocked" and "failed review: there is no such step" in failed["answer"]
    assert (await works.http.get(f"/runs/{failed['run_id']}")).json()["roles"]["subtasks"][0]["attempts"] == 1


async def test_a_role_answering_without_its_tool_gets_one_reminder_then_blocks(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    llm.add_text("Here is my plan: do it.")
    plan(llm, {"subtasks": [{"task": "only step", "criteria": []}]})
    execute(llm, None, "Done.")
    llm.add_text("Looks fine to me.")
    llm.add_text("Really, it is fine.")
    answer = await works.query(auto_mode=True, roles={"planner": {}, "executor": {}, "reviewer": {}})
    assert answer["stopped_by"] == "blocked"
    assert (
        "reviewer's model answered without calling submit_review, even after a reminder" in answer["answer"]
    )
    reminders = [
        r["messages"][-1]["content"] for r in llm.requests if "submit_" in r["messages"][-1]["content"]
    ]
    assert len(reminders) == 2  # one for the planner (which then planned), one for the reviewer


async def test_each_role_uses_its_model_or_the_querys(works: Works, llm: ScriptedOpenAIServer) -> None:
    models = (await works.http.get("/query/orchestrator-models")).json()
    default, other = models["default_model"], models["allowed_models"][-1]
    assert other != default
    plan(llm, {"subtasks": [{"task": "only step"}]})
    execute(llm, None, "Done.")
    review(llm, "pass")
    roles: dict[str, Any] = {"planner": {}, "executor": {}, "reviewer": {"model": other}}
    answer = await works.query(auto_mode=True, roles=roles)
    assert answer["status"] == "completed", answer
    assert [r["model"] for r in llm.requests] == [default, default, other]

    refused = await works.http.post(
        "/query",
        json={"query": "x", "auto_mode": True, "roles": {"planner": {"model": "nope"}, "executor": {}}},
    )
    assert (
        refused.json()["error_code"] == "invalid_model" and "roles.planner.model" in refused.json()["error"]
    )
    assert refused.json()["run_id"] is None and len(llm.requests) == 3  # refused before it ran


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"auto_mode": True, "roles": ["planner", "boss"]}, "boss"),
        ({"auto_mode": True, "roles": ["planner", "reviewer"]}, "executor missing"),
        ({"auto_mode": True, "roles": {"planner": {}, "executor": {}, "critic": {}}}, "add reviewer"),
        ({"roles": ["planner", "executor"]}, "set auto_mode to true"),
        ({"auto_mode": True, "roles": {"planner": {"model": "x", "temp": 1}, "executor": {}}}, "temp"),
    ],
)
async def test_bad_roles_are_refused_with_a_clear_422(works: Works, body: dict[str, Any], says: str) -> None:
    response = await works.http.post("/query", json={"query": "x", **body})
    assert response.status_code == 422
    assert says in response.text


async def test_a_critics_disagreement_waits_for_a_person_through_the_approvals_api(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    plan(llm, {"subtasks": [{"task": "only step", "criteria": ["done"]}]})
    execute(llm, 1, "Done.")
    review(llm, "pass", "looks done")
    review(llm, "fail", "it did the wrong step")
    roles = {"planner": {}, "executor": {}, "reviewer": {}, "critic": {}}
    paused = await works.query(auto_mode=True, roles=roles)
    assert paused["status"] == "awaiting_approval", paused
    approval = paused["approvals"][0]
    assert (approval["agent_id"], approval["tool_name"]) == ("coordinator", "critic_disagreement")
    assert approval["arguments"]["reviewer"]["verdict"] == "pass"
    assert approval["arguments"]["critic"]["verdict"] == "fail"
    record = (await works.http.get(f"/runs/{paused['run_id']}")).json()
    assert record["state"] == "awaiting_approval"
    assert record["roles"]["phase"] == "escalated"
    assert record["roles"]["pending"]["approval_id"] == approval["approval_id"]

    decided = await works.http.post(f"/approvals/{approval['approval_id']}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    assert decided.json()["status"] == "completed" and decided.json()["answer"] == "Done."
    record = (await works.http.get(f"/runs/{paused['run_id']}")).json()
    assert record["state"] == "completed" and record["roles"]["phase"] == "complete"
    verdicts = record["roles"]["subtasks"][0]["verdicts"]
    assert [(v["role"], v["verdict"]) for v in verdicts] == [
        ("reviewer", "pass"),
        ("critic", "fail"),
        ("person", "pass"),
    ]
    assert works.calls == [("step", {"n": 1})]  # the sub-task was not run again

    # Rejecting takes the critic's verdict: a fail blocks the run.
    plan(llm, {"subtasks": [{"task": "only step", "criteria": ["done"]}]})
    execute(llm, None, "Done.")
    review(llm, "pass", "looks done")
    review(llm, "fail", "it did the wrong step")
    paused = await works.query(auto_mode=True, roles=roles)
    approval_id = paused["approvals"][0]["approval_id"]
    decided = await works.http.post(f"/approvals/{approval_id}", json={"decision": "reject"})
    assert decided.json()["stopped_by"] == "blocked", decided.text


async def test_a_run_killed_mid_plan_resumes_on_another_master_without_rerunning_a_passed_subtask(
    llm: ScriptedOpenAIServer,
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    release = asyncio.Event()
    plan(llm)
    execute(llm, 1, "Step one is done.")
    review(llm, "pass")
    llm.add_tool_call("works__step", {"n": 2})  # sub-task 2: a round that completes, then one cut off
    llm.add_tool_call("works__slow", {})
    async with (
        master_a_and_b(llm) as (a, b),
        works_agent(a.ws_url, calls, release) as slow_started,
        httpx.AsyncClient(base_url=a.base_url, headers=HEADERS, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.base_url, headers=HEADERS, timeout=60) as on_b,
    ):
        await _wait_for_agent(on_a, "works")
        body = {"query": "do the work", "auto_mode": True, "roles": ROLES, "stream": True}
        async with on_a.stream("POST", "/query", json=body) as response:
            run_id = response.headers["OpenAgent-Run-Id"]
            async with asyncio.timeout(60):
                await slow_started.wait()
            await _wait_for(on_a, run_id, lambda r: r["in_flight"])  # written by A's tick
            kill(a)
        failed = await _wait_for(on_b, run_id, lambda r: r["state"] == "failed")
        assert failed["resumable"] is True
        assert [s["status"] for s in failed["roles"]["subtasks"]] == ["passed", "running"]

        async with works_agent(b.ws_url, calls):
            await _wait_for_agent(on_b, "works")
            execute(llm, None, "Step two is done.")
            review(llm, "pass")
            resumed = await on_b.post(f"/runs/{run_id}/resume", json={})
            assert resumed.status_code == 200, resumed.text
            assert resumed.json()["status"] == "completed", resumed.json()
        told = llm.requests[-2]["messages"]  # the executor goes on from its kept rounds
        assert "do step two" in told[1]["content"]
        assert [m["role"] for m in told[2:]] == ["assistant", "tool", "assistant", "tool"]
        assert '"n": 2' in told[3]["content"] and "unknown" in told[5]["content"]  # slow: told, not re-sent
        record = (await on_b.get(f"/runs/{run_id}")).json()
        assert record["state"] == "completed" and record["holder"] == "master-b"
        assert [(s["status"], s["attempts"]) for s in record["roles"]["subtasks"]] == [
            ("passed", 1),
            ("passed", 1),
        ]
        release.set()
    assert calls == [("step", {"n": 1}), ("step", {"n": 2}), ("slow", {})]  # nothing ran again


async def test_an_executor_call_that_needs_approval_waits_then_the_subtask_goes_on(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    paid: list[str] = []

    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> dict[str, Any]:
        paid.append(arguments["to"])
        return {"paid": arguments["to"]}

    config = ClientConfig(master_ws=works.master.ws_url, api_key=KEY)
    async with OrchestratorActionAgent("payer", [PAY], handler, config=config):
        await _wait_for_agent(works.http, "payer")
        plan(llm, {"subtasks": [{"task": "pay bob", "criteria": ["bob is paid"]}]})
        llm.add_tool_call("payer__pay", {"to": "bob"})
        paused = await works.query(auto_mode=True, roles=ROLES)
        assert paused["status"] == "awaiting_approval", paused
        approval = paused["approvals"][0]
        assert (approval["agent_id"], approval["tool_name"]) == ("payer", "pay") and paid == []
        record = (await works.http.get(f"/runs/{paused['run_id']}")).json()
        assert record["state"] == "awaiting_approval" and record["roles"]["phase"] == "execute"

        llm.add_text("Bob is paid.")
        review(llm, "pass", "paid")
        decided = await works.http.post(f"/approvals/{approval['approval_id']}", json={"decision": "approve"})
        assert decided.status_code == 200, decided.text
        assert decided.json()["status"] == "completed" and decided.json()["answer"] == "Bob is paid."
    assert paid == ["bob"]
    record = (await works.http.get(f"/runs/{paused['run_id']}")).json()
    assert record["state"] == "completed"
    assert [(s["status"], s["attempts"]) for s in record["roles"]["subtasks"]] == [("passed", 1)]


async def test_a_budget_stop_in_a_subtask_resumes_from_its_last_round(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    plan(llm, {"subtasks": [{"task": "two steps", "criteria": ["both done"]}]})
    llm.add_tool_call("works__step", {"n": 1})
    llm.add_tool_call("works__step", {"n": 2})
    stopped = await works.query(auto_mode=True, roles=ROLES, budget={"max_tool_calls": 1})
    assert stopped["status"] == "stopped" and stopped["stopped_by"] == "max_tool_calls", stopped
    record = (await works.http.get(f"/runs/{stopped['run_id']}")).json()
    assert record["resumable"] is True and record["roles"]["phase"] == "execute"

    llm.add_tool_call("works__step", {"n": 2})
    llm.add_text("Both steps are done.")
    review(llm, "pass")
    resumed = await works.http.post(
        f"/runs/{stopped['run_id']}/resume", json={"budget": {"max_tool_calls": 5}}
    )
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["status"] == "completed" and resumed.json()["answer"] == "Both steps are done."
    assert works.calls == [("step", {"n": 1}), ("step", {"n": 2})]  # step 1 not run again
    kept = [m for m in llm.requests[-3]["messages"] if m.get("role") == "tool"]
    assert len(kept) == 1 and '"n": 1' in kept[0]["content"]  # the executor went on from its round
    record = (await works.http.get(f"/runs/{stopped['run_id']}")).json()
    assert record["state"] == "completed" and record["roles"]["subtasks"][0]["attempts"] == 1


async def test_the_roles_prompt_profile_runs_planner_executor_and_reviewer(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    plan(llm, {"subtasks": [{"task": "only step"}]})
    execute(llm, None, "Done.")
    review(llm, "pass")
    answer = await works.query(orchestrator_prompt_profile="roles")
    assert answer["status"] == "completed" and answer["answer"] == "Done."
    offered = [[t["function"]["name"] for t in r.get("tools") or []] for r in llm.requests]
    assert offered[0] == ["submit_plan"] and offered[2] == ["submit_review"]
    assert "executor of one sub-task" in llm.requests[1]["messages"][0]["content"]
