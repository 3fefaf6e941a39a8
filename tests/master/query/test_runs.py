"""Runs, through the real app: every answer names its run, ``GET /runs/{run_id}`` reads its record,
a run a budget stopped resumes with a larger one without repeating its calls, and a run whose
master dies is marked failed by another master. A real master (lifespan, Redis, uvicorn on
loopback; a subprocess where it is killed), the scripted LLM and an SDK WebSocket agent that
counts its calls. The killed-master tests start both masters with :func:`master_a_and_b`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from master.storage.redis_keys import RUNS_RUNNING_KEY, run_checkpoint_key
from openagent import OrchestratorActionAgent, QueryClient, ToolSchema
from openagent.config import ClientConfig
from openagent.testing import ScriptedOpenAIServer
from tests.conftest import master_env
from tests.factories import EVERY_TENANT, InProcessMaster, MasterProcess, in_process_master

KEY = "runs-key"
HEADERS = {"Authorization": f"Bearer {KEY}"}

STEP = ToolSchema(
    name="step",
    description="Do one step",
    parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
)
SLOW = ToolSchema(name="slow", description="Takes its time", parameters={"type": "object", "properties": {}})


@dataclass
class Works:
    """A master with the ``works`` agent: ``calls`` lists every call the agent ran."""

    master: InProcessMaster
    http: httpx.AsyncClient
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def query(self, **body: Any) -> dict[str, Any]:
        response = await self.http.post("/query", json={"query": "do the work", **body})
        assert response.status_code == 200, response.text
        return dict(response.json())


@asynccontextmanager
async def works_agent(
    ws_url: str, calls: list[tuple[str, dict[str, Any]]], release: asyncio.Event | None = None, key: str = KEY
) -> AsyncIterator[asyncio.Event]:
    """The ``works`` agent on ``ws_url``; ``slow`` waits for ``release``. Yields an event set when
    ``slow`` was called."""
    started = asyncio.Event()

    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> dict[str, Any]:
        calls.append((tool_name, arguments))
        if tool_name == "slow":
            started.set()
            assert release is not None
            await release.wait()
        return {"done": tool_name, **arguments}

    config = ClientConfig(master_ws=ws_url, api_key=key)
    async with OrchestratorActionAgent("works", [STEP, SLOW], handler, config=config):
        yield started


@pytest.fixture
async def works(llm: ScriptedOpenAIServer) -> AsyncIterator[Works]:
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


async def test_every_answer_names_its_run_and_the_record_has_its_calls(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    llm.add_tool_call("works__step", {"n": 1})
    llm.add_text("Done one step.")
    answer = await works.query()
    run_id = answer["run_id"]
    assert run_id and answer["answer"] == "Done one step."
    record = (await works.http.get(f"/runs/{run_id}")).json()
    assert record["state"] == "completed" and record["session_id"] == answer["session_id"]
    assert record["holder"] == works.master.services.queries.runs.master_id  # type: ignore[union-attr]
    assert [(c["tool_name"], c["arguments"], c["success"]) for c in record["completed"]] == [
        ("step", {"n": 1}, True)
    ]
    assert record["in_flight"] == [] and record["unknown"] == [] and record["tenant"] is None
    assert record["resumable"] is False

    # SSE: the header names the run before the end, the query_result carries it.
    llm.add_text("Streamed.")
    async with works.http.stream("POST", "/query", json={"query": "hi", "stream": True}) as response:
        header = response.headers["OpenAgent-Run-Id"]
        events = [json.loads(line[6:]) async for line in response.aiter_lines() if line.startswith("data: ")]
    assert events[-1]["run_id"] == header and events[-1]["answer"] == "Streamed."

    # The WebSocket query client's query_result.
    llm.add_text("Over the socket.")
    config = ClientConfig(master_ws=works.master.ws_url, api_key=KEY)
    async with QueryClient(config=config) as client:
        result = await client.query("hi", timeout=60)
    assert result.run_id and result.answer == "Over the socket."
    assert (await works.http.get(f"/runs/{result.run_id}")).json()["state"] == "completed"

    # The OpenAI-compatible door's own field.
    llm.add_text("Via OpenAI.")
    completion = await works.http.post(
        "/v1/chat/completions", json={"model": "openagent", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert completion.status_code == 200, completion.text
    openagent_run = completion.json()["openagent"]["run_id"]
    assert (await works.http.get(f"/runs/{openagent_run}")).json()["state"] == "completed"

    # A run that failed is recorded failed, with why.
    llm.add_error(400, "the provider refused it", retry=False)
    failed = await works.http.post("/query", json={"query": "hi"})
    assert failed.status_code == 502, failed.text
    record = (await works.http.get(f"/runs/{failed.json()['run_id']}")).json()
    assert record["state"] == "failed" and "the provider refused it" in record["reason"]

    # A refused request has no run (a record would keep what the refusal names).
    refused = await works.http.post("/query", json={"query": "hi", "session_id": "no-such-session"})
    assert refused.status_code == 404 and refused.json()["run_id"] is None


async def test_a_budget_halt_resumes_with_a_larger_budget_without_repeating_calls(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    llm.add_tool_call("works__step", {"n": 1})
    llm.add_tool_call("works__step", {"n": 2})  # asked for, over the budget: not run
    stopped = await works.query(auto_mode=True, budget={"max_tool_calls": 1})
    assert stopped["status"] == "stopped" and stopped["stopped_by"] == "max_tool_calls"
    assert works.calls == [("step", {"n": 1})]
    run_id = stopped["run_id"]
    record = (await works.http.get(f"/runs/{run_id}")).json()
    assert record["state"] == "stopped" and record["stopped_by"] == "max_tool_calls"
    assert record["resumable"] is True and len(record["completed"]) == 1

    same = await works.http.post(f"/runs/{run_id}/resume", json={"budget": {"max_tool_calls": 1}})
    assert same.status_code == 422 and same.json()["error_code"] == "budget_not_larger"
    assert "max_tool_calls" in same.json()["detail"]
    smaller = await works.http.post(
        f"/runs/{run_id}/resume", json={"budget": {"max_tool_calls": 5, "max_tokens": 1}}
    )
    assert smaller.status_code == 422 and "max_tokens" in smaller.json()["detail"]

    llm.add_tool_call("works__step", {"n": 2})
    llm.add_text("Did steps 1 and 2.")
    resumed = await works.http.post(f"/runs/{run_id}/resume", json={"budget": {"max_tool_calls": 3}})
    assert resumed.status_code == 200, resumed.text
    answer = resumed.json()
    assert answer["run_id"] == run_id and answer["session_id"] == stopped["session_id"]
    assert answer["status"] == "completed" and answer["answer"] == "Did steps 1 and 2."
    assert works.calls == [("step", {"n": 1}), ("step", {"n": 2})]  # step 1 not run again
    # The model went on from where the run stopped: step 1's result is in what it was sent.
    resumed_request = llm.requests[-2]
    assert any('"done": "step"' in str(m.get("content")) for m in resumed_request["messages"])
    record = (await works.http.get(f"/runs/{run_id}")).json()
    assert record["state"] == "completed" and [c["arguments"]["n"] for c in record["completed"]] == [1, 2]

    again = await works.http.post(f"/runs/{run_id}/resume", json={"budget": {"max_tool_calls": 9}})
    assert again.status_code == 409 and again.json()["error_code"] == "run_not_resumable"
    assert "completed" in again.json()["detail"]


async def test_a_run_halted_before_the_typed_state_resumes_from_its_old_checkpoint(
    works: Works, llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    """A checkpoint an earlier version wrote (an untyped dictionary, ``kind: halt``) is read as the
    run's state: the run resumes from it without repeating its call."""
    llm.add_tool_call("works__step", {"n": 1})
    llm.add_tool_call("works__step", {"n": 2})
    stopped = await works.query(auto_mode=True, budget={"max_tool_calls": 1})
    run_id = stopped["run_id"]
    key = run_checkpoint_key(run_id)
    state = json.loads(await redis_client.get(key) or "{}")
    assert state["pending"] == {"kind": "budget", "stopped_by": "max_tool_calls"}
    old = ("run_id", "session_id", "query", "query_id", "messages", "steps", "stopped_by", "request")
    legacy = {**{name: state[name] for name in old}, "kind": "halt", "budget": state["budget"]}
    legacy |= {"spent": state["spent"], "unknown": []}
    await redis_client.set(key, json.dumps(legacy), keepttl=True)
    assert (await works.http.get(f"/runs/{run_id}")).json()["resumable"] is True

    llm.add_tool_call("works__step", {"n": 2})
    llm.add_text("Did steps 1 and 2.")
    resumed = await works.http.post(f"/runs/{run_id}/resume", json={"budget": {"max_tool_calls": 3}})
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["answer"] == "Did steps 1 and 2."
    assert works.calls == [("step", {"n": 1}), ("step", {"n": 2})]


async def test_a_step_limit_halt_resumes(works: Works, llm: ScriptedOpenAIServer) -> None:
    settings = works.master.services.settings
    limit = settings.orchestrator_auto_max_steps
    for n in range(limit + 1):
        llm.add_tool_call("works__step", {"n": n})
    llm.add_text("Out of steps.")
    stopped = await works.query(auto_mode=True)
    assert stopped["status"] == "stopped" and stopped["stopped_by"] == "max_steps"
    assert len(works.calls) == limit
    llm.add_tool_call("works__step", {"n": limit})
    llm.add_text("All steps done.")
    resumed = await works.http.post(f"/runs/{stopped['run_id']}/resume", json={})
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["answer"] == "All steps done."
    assert [args["n"] for _, args in works.calls] == list(range(limit + 1))


async def test_resume_refusals(works: Works, llm: ScriptedOpenAIServer) -> None:
    unknown = await works.http.post("/runs/run-nope/resume", json={"budget": {"max_tool_calls": 3}})
    assert unknown.status_code == 404 and unknown.json()["error_code"] == "unknown_run"
    assert (await works.http.get("/runs/run-nope")).json()["error_code"] == "unknown_run"
    llm.add_text("Hello.")
    done = await works.query()
    refused = await works.http.post(f"/runs/{done['run_id']}/resume", json={"budget": {"max_tool_calls": 3}})
    assert refused.status_code == 409 and refused.json()["error_code"] == "run_not_resumable"
    assert "is completed" in refused.json()["detail"]
    extra = await works.http.post(f"/runs/{done['run_id']}/resume", json={"budget": {}, "nope": 1})
    assert extra.status_code == 422


@asynccontextmanager
async def master_a_and_b(
    llm: ScriptedOpenAIServer, key: str = KEY
) -> AsyncIterator[tuple[MasterProcess, InProcessMaster]]:
    """Master A, a subprocess for :func:`kill`, and master B in this loop, on one Redis; each
    holds a run's lease for 1 s, so B soon finds A's runs lost once A is gone."""
    env = master_env(
        llm, OPENAGENT_API_KEY=key, OPENAGENT_MASTER_ID="master-a", OPENAGENT_RUN_LEASE_SECONDS="1"
    )
    async with (
        MasterProcess(env) as a,
        in_process_master(
            openai_base_url=llm.base_url,
            openai_api_key="scripted",
            openagent_api_key=key,
            openagent_master_id="master-b",
            openagent_run_lease_seconds=1,
        ) as b,
    ):
        yield a, b


def kill(master: MasterProcess) -> None:
    """SIGKILL: the master stops at once, releasing nothing."""
    assert master.process is not None
    os.kill(master.process.pid, signal.SIGKILL)
    master.process.wait(timeout=30)


async def _wait_for_agent(http: httpx.AsyncClient, agent_id: str) -> None:
    async with asyncio.timeout(60):
        while agent_id not in [row["agent_id"] for row in (await http.get("/agents")).json()["agents"]]:
            await asyncio.sleep(0.05)


async def _wait_for(http: httpx.AsyncClient, run_id: str, check: Any) -> dict[str, Any]:
    async with asyncio.timeout(60):
        while True:
            response = await http.get(f"/runs/{run_id}")
            if response.status_code == 200 and check(response.json()):
                return dict(response.json())
            await asyncio.sleep(0.1)


async def test_a_run_whose_master_is_killed_is_failed_by_another_master(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []
    release = asyncio.Event()
    llm.add_tool_call("works__slow", {})
    async with (
        master_a_and_b(llm) as (a, b),
        works_agent(a.ws_url, calls, release) as slow_started,
        httpx.AsyncClient(base_url=a.base_url, headers=HEADERS, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.base_url, headers=HEADERS, timeout=60) as on_b,
    ):
        await _wait_for_agent(on_a, "works")
        async with on_a.stream("POST", "/query", json={"query": "slowly", "stream": True}) as response:
            run_id = response.headers["OpenAgent-Run-Id"]
            async with asyncio.timeout(60):
                await slow_started.wait()
            running = await _wait_for(on_a, run_id, lambda r: r["in_flight"])  # written by A's tick
            assert running["state"] == "running" and running["holder"] == "master-a"
            kill(a)
        # B's sweep marks it, with no one asking (the record read from Redis directly).
        async with asyncio.timeout(60):
            while json.loads(await redis_client.get(f"run:{run_id}") or "{}").get("state") != "failed":
                await asyncio.sleep(0.1)
        failed = await _wait_for(on_b, run_id, lambda r: r["state"] == "failed")
        assert "master-a" in failed["reason"] and "lost" in failed["reason"]
        assert [call["name"] for call in failed["unknown"]] == ["works__slow"]
        assert failed["in_flight"] == [] and failed["resumable"] is False
        release.set()
    assert calls == [("slow", {})]  # never sent again


PAY = ToolSchema(
    name="pay",
    description="Pay someone",
    parameters={"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
    requires_approval=True,
)


async def test_an_approved_call_in_flight_when_its_master_dies_is_unknown_on_resume_never_rerun(
    llm: ScriptedOpenAIServer,
) -> None:
    calls: list[str] = []
    paying, release = asyncio.Event(), asyncio.Event()

    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> dict[str, Any]:
        calls.append(tool_name)
        paying.set()
        await release.wait()
        return {"paid": arguments["to"]}

    llm.add_tool_call("payer__pay", {"to": "bob"})
    async with (
        master_a_and_b(llm) as (a, b),
        OrchestratorActionAgent(
            "payer", [PAY], handler, config=ClientConfig(master_ws=a.ws_url, api_key=KEY)
        ),
        httpx.AsyncClient(base_url=a.base_url, headers=HEADERS, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.base_url, headers=HEADERS, timeout=60) as on_b,
    ):
        await _wait_for_agent(on_a, "payer")
        paused = (await on_a.post("/query", json={"query": "pay bob"})).json()
        assert paused["status"] == "awaiting_approval", paused
        run_id, approval_id = paused["run_id"], paused["approvals"][0]["approval_id"]
        assert (await on_b.get(f"/runs/{run_id}")).json()["state"] == "awaiting_approval"

        deciding = asyncio.create_task(on_a.post(f"/approvals/{approval_id}", json={"decision": "approve"}))
        async with asyncio.timeout(60):
            await paying.wait()
        kill(a)
        with pytest.raises(httpx.HTTPError):
            await deciding

        failed = await _wait_for(on_b, run_id, lambda r: r["state"] == "failed")
        assert "master-a" in failed["reason"] and failed["resumable"] is True
        assert [call["name"] for call in failed["unknown"]] == ["payer__pay"]

        llm.add_text("I cannot tell whether Bob was paid.")
        resumed = await on_b.post(f"/runs/{run_id}/resume", json={})
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["answer"] == "I cannot tell whether Bob was paid."
        told = [m for m in llm.requests[-1]["messages"] if m.get("role") == "tool"]
        assert len(told) == 1 and "unknown" in told[0]["content"]
        record = (await on_b.get(f"/runs/{run_id}")).json()
        assert record["state"] == "completed" and record["holder"] == "master-b"
        assert [call["name"] for call in record["unknown"]] == ["payer__pay"]
        again = await on_b.post(f"/runs/{run_id}/resume", json={})
        assert again.status_code == 409
        release.set()
    assert calls == ["pay"]  # sent once, never again


async def test_an_a2a_task_whose_run_lost_its_master_reads_failed(llm: ScriptedOpenAIServer) -> None:
    from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest, SendMessageRequest, TaskState

    from tests.master.doors.test_a2a_server import KEY as A2A_KEY
    from tests.master.doors.test_a2a_server import a2a_client, text_message

    calls: list[tuple[str, dict[str, Any]]] = []
    release = asyncio.Event()
    llm.add_tool_call("works__slow", {})
    async with (
        master_a_and_b(llm, A2A_KEY) as (a, b),
        works_agent(a.ws_url, calls, release, key=A2A_KEY) as slow_started,
        httpx.AsyncClient(headers={"Authorization": f"Bearer {A2A_KEY}"}, timeout=30) as http,
    ):
        async with asyncio.timeout(60):
            while (
                await http.get(f"{a.base_url}/a2a/agents/works/.well-known/agent-card.json")
            ).status_code != 200:
                await asyncio.sleep(0.1)
        async with a2a_client(a.base_url, streaming=True) as on_a:
            stream = on_a.send_message(SendMessageRequest(message=text_message("slowly")))
            first = await anext(stream)
            async with asyncio.timeout(60):
                await slow_started.wait()
            task_id = first.task.id
            kill(a)
            with pytest.raises(Exception):  # noqa: B017 - the stream's master is gone
                async for _ in stream:
                    pass
        async with a2a_client(b.base_url) as on_b, asyncio.timeout(60):
            while True:
                task = await on_b.get_task(GetTaskRequest(id=task_id))
                if task.status.state != TaskState.TASK_STATE_WORKING:
                    break
                await asyncio.sleep(0.1)
            listed = await on_b.list_tasks(ListTasksRequest())
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert "master-a" in task.status.message.parts[0].text
        assert {t.id: t.status.state for t in listed.tasks}[task_id] == TaskState.TASK_STATE_FAILED
        release.set()
    assert calls == [("slow", {})]


async def test_a_resume_that_fails_stays_resumable_without_repeating_calls(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    llm.add_tool_call("works__step", {"n": 1})
    llm.add_tool_call("works__step", {"n": 2})
    stopped = await works.query(auto_mode=True, budget={"max_tool_calls": 1})
    run_id = stopped["run_id"]
    llm.add_error(400, "the provider is down")
    failed = await works.http.post(f"/runs/{run_id}/resume", json={"budget": {"max_tool_calls": 3}})
    assert failed.json()["success"] is False and failed.json()["run_id"] == run_id, failed.text
    record = (await works.http.get(f"/runs/{run_id}")).json()
    assert record["state"] == "failed" and record["resumable"] is True
    llm.add_tool_call("works__step", {"n": 2})
    llm.add_text("Did steps 1 and 2.")
    resumed = await works.http.post(f"/runs/{run_id}/resume", json={"budget": {"max_tool_calls": 3}})
    assert resumed.status_code == 200 and resumed.json()["answer"] == "Did steps 1 and 2.", resumed.text
    assert works.calls == [("step", {"n": 1}), ("step", {"n": 2})]


async def test_a_master_killed_just_after_its_first_call_and_restarted_under_its_id_lists_the_call_unknown(
    llm: ScriptedOpenAIServer,
) -> None:
    """Killed as soon as the agent got the run's first call (long before a lease tick would have
    written it), the run's record still names the call: it was written before the call was sent.
    The master restarted under the same ``OPENAGENT_MASTER_ID`` does not take its old runs for
    its own: it marks them failed, the call unknown, never sent again."""
    calls: list[tuple[str, dict[str, Any]]] = []
    release = asyncio.Event()
    llm.add_tool_call("works__slow", {})
    # A lease of 30 s: a tick (a third of it) would write the call in flight only after 10 s.
    env = master_env(
        llm, OPENAGENT_API_KEY=KEY, OPENAGENT_MASTER_ID="master-restarted", OPENAGENT_RUN_LEASE_SECONDS="30"
    )
    async with MasterProcess(env) as a, works_agent(a.ws_url, calls, release) as slow_started:
        async with httpx.AsyncClient(base_url=a.base_url, headers=HEADERS, timeout=60) as on_a:
            await _wait_for_agent(on_a, "works")
            async with on_a.stream("POST", "/query", json={"query": "slowly", "stream": True}) as response:
                run_id = response.headers["OpenAgent-Run-Id"]
                async with asyncio.timeout(60):
                    await slow_started.wait()
                kill(a)
        # Its next life, in this process (quicker to start than a subprocess), under the same id.
        async with (
            in_process_master(
                openai_base_url=llm.base_url,
                openai_api_key="scripted",
                openagent_api_key=KEY,
                openagent_master_id="master-restarted",
                openagent_run_lease_seconds=30,
            ) as again,
            httpx.AsyncClient(base_url=again.base_url, headers=HEADERS, timeout=60) as on_again,
        ):
            failed = await _wait_for(on_again, run_id, lambda r: r["state"] != "running")
        release.set()
    assert failed["state"] == "failed" and "master-restarted" in failed["reason"], failed
    assert [call["name"] for call in failed["unknown"]] == ["works__slow"]
    assert failed["in_flight"] == [] and failed["resumable"] is False
    assert calls == [("slow", {})]  # never sent again


async def test_a_resume_that_made_calls_then_failed_never_repeats_them(
    works: Works, llm: ScriptedOpenAIServer
) -> None:
    llm.add_tool_call("works__step", {"n": 1})
    llm.add_tool_call("works__step", {"n": 2})
    stopped = await works.query(auto_mode=True, budget={"max_tool_calls": 1})
    run_id = stopped["run_id"]
    llm.add_tool_call("works__step", {"n": 2})  # the resumed part makes a call...
    llm.add_error(400, "the provider is down", retry=False)  # ...then fails
    failed = (await works.http.post(f"/runs/{run_id}/resume", json={"budget": {"max_tool_calls": 5}})).json()
    # The model failed after a tool had run: the run stops there, resumable, its call kept.
    assert (failed["run_id"], failed["status"], failed["stopped_by"]) == (run_id, "stopped", "llm_error"), (
        failed
    )
    assert works.calls == [("step", {"n": 1}), ("step", {"n": 2})]
    record = (await works.http.get(f"/runs/{run_id}")).json()
    assert [c["arguments"]["n"] for c in record["completed"]] == [1, 2] and record["resumable"], record
    # Resumed, it goes on from after step 2 (whose result the model is shown): nothing is sent again.
    llm.add_text("Both steps done.")
    again = await works.http.post(f"/runs/{run_id}/resume", json={"budget": {"max_tool_calls": 9}})
    assert again.status_code == 200 and again.json()["answer"] == "Both steps done.", again.text
    shown = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert any('"n": 2' in content or '"n":2' in content for content in shown), shown
    assert works.calls == [("step", {"n": 1}), ("step", {"n": 2})]


async def test_a_healthy_run_in_a_long_call_is_not_failed_by_another_master(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    """Master A holds a run through a call that lasts several of its 1 s leases; master B, sweeping
    the running runs each third of a lease (and asked for the run), leaves it running: A renews
    its lease while its call runs."""
    calls: list[tuple[str, dict[str, Any]]] = []
    release = asyncio.Event()
    settings: dict[str, Any] = {
        "openai_base_url": llm.base_url,
        "openai_api_key": "scripted",
        "openagent_api_key": KEY,
        "openagent_run_lease_seconds": 1,
    }
    async with (
        in_process_master(openagent_master_id="long-a", **settings) as a,
        in_process_master(openagent_master_id="long-b", **settings) as b,
        works_agent(a.ws_url, calls, release) as slow_started,
        httpx.AsyncClient(base_url=a.base_url, headers=HEADERS, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.base_url, headers=HEADERS, timeout=60) as on_b,
    ):
        await _wait_for_agent(on_a, "works")
        b_runs = b.services.queries.runs
        assert b_runs is not None
        ticks = 0
        tick = b_runs.tick

        async def counted() -> int:
            nonlocal ticks
            marked = await tick()
            ticks += 1
            return marked

        b_runs.tick = counted  # type: ignore[method-assign]
        llm.add_tool_call("works__slow", {})
        llm.add_text("Slow but done.")
        asking = asyncio.create_task(on_a.post("/query", json={"query": "slowly"}))
        async with asyncio.timeout(60):
            await slow_started.wait()
        run_id = await _running_run_of(redis_client, "long-a")
        seen_from = ticks
        async with asyncio.timeout(60):
            while ticks < seen_from + 7:  # B swept for over two of A's leases
                record = (await on_b.get(f"/runs/{run_id}")).json()
                assert record["state"] == "running", record
                await asyncio.sleep(0.1)
        release.set()
        answer = (await asking).json()
        assert answer["answer"] == "Slow but done." and answer["run_id"] == run_id
        record = (await on_b.get(f"/runs/{run_id}")).json()
        assert record["state"] == "completed" and record["unknown"] == [], record
    assert calls == [("slow", {})]


async def _running_run_of(redis_client: aioredis.Redis, holder: str) -> str:
    """The id of the run ``holder`` has in the running set (read from Redis, as a sweep does)."""
    async with asyncio.timeout(60):
        while True:
            for run_id in sorted(await redis_client.smembers(RUNS_RUNNING_KEY)):
                record = json.loads(await redis_client.get(f"run:{run_id}") or "{}")
                if record.get("holder") == holder and record.get("state") == "running":
                    return str(run_id)
            await asyncio.sleep(0.05)


async def test_a_run_held_by_one_master_is_cancelled_through_another(
    llm: ScriptedOpenAIServer, redis_client: aioredis.Redis
) -> None:
    """``DELETE /runs/{run_id}`` on master B stops the run master A holds: A's asker gets
    ``run_cancelled``, the record reads ``cancelled`` with the call in flight ``unknown``."""
    calls: list[tuple[str, dict[str, Any]]] = []
    release = asyncio.Event()
    settings: dict[str, Any] = {
        "openai_base_url": llm.base_url,
        "openai_api_key": "scripted",
        "openagent_api_key": KEY,
    }
    async with (
        in_process_master(openagent_master_id="cancel-a", **settings) as a,
        in_process_master(openagent_master_id="cancel-b", **settings) as b,
        works_agent(a.ws_url, calls, release) as slow_started,
        httpx.AsyncClient(base_url=a.base_url, headers=HEADERS, timeout=60) as on_a,
        httpx.AsyncClient(base_url=b.base_url, headers=HEADERS, timeout=60) as on_b,
    ):
        await _wait_for_agent(on_a, "works")
        llm.add_tool_call("works__slow", {})
        asking = asyncio.create_task(on_a.post("/query", json={"query": "slowly"}))
        async with asyncio.timeout(60):
            await slow_started.wait()
        run_id = await _running_run_of(redis_client, "cancel-a")

        cancelled = await on_b.delete(f"/runs/{run_id}")
        assert cancelled.status_code == 200, cancelled.text
        record = cancelled.json()
        assert record["state"] == "cancelled" and record["holder"] == "cancel-a", record
        assert [call["name"] for call in record["unknown"]] == ["works__slow"] and record["in_flight"] == []
        assert record["resumable"] is False
        answer = await asking
        assert answer.status_code == 409 and answer.json()["error_code"] == "run_cancelled", answer.text
        assert answer.json()["run_id"] == run_id

        again = await on_b.delete(f"/runs/{run_id}")  # once stopped, it stays as it ended
        assert again.status_code == 200 and again.json()["state"] == "cancelled"
        llm.add_text("Done.")
        done = (await on_b.post("/query", json={"query": "hi"})).json()
        finished = await on_b.delete(f"/runs/{done['run_id']}")
        assert finished.status_code == 409 and finished.json()["error_code"] == "run_not_running"
        assert "completed" in finished.json()["detail"]
        assert (await on_b.delete("/runs/run-nope")).json()["error_code"] == "unknown_run"
        release.set()
    assert calls == [("slow", {})]
