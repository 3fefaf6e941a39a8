"""The run's verbs by id (:mod:`master.query.verbs`): a run paused for approvals goes on with
the decisions given for it, and decisions that do not fit what the run waits for are refused by
name, deciding nothing. A real master, the scripted LLM and the ``bank`` agent of the approvals tests."""

from __future__ import annotations

import uuid

import pytest

from master.auth import SYSTEM
from master.query.entry import QueryRun
from master.query.verbs import RunRefused, RunVerbs
from master.runs.decisions import Approve, RaiseBudget, Reject, ToolResult
from master.runs.extras import RunExtras
from openagent.testing import ScriptedOpenAIServer, ToolCall
from protocol import QueryRequest
from tests.master.query.test_approvals import bank


async def test_a_run_paused_for_approvals_resumes_by_its_id_with_a_decision_per_call(
    llm: ScriptedOpenAIServer,
) -> None:
    async with bank(llm) as hub:
        llm.add_tool_calls([("bank__transfer", {"to": "bob", "amount": 10}), ("bank__balance", {})])
        paused = await hub.query()
        [approval] = paused["approvals"]
        verbs = RunVerbs(hub.master.services.entry, hub.master.services.approvals)

        with pytest.raises(RunRefused, match="POST /approvals/") as refused:
            await verbs.resume(paused["run_id"], [RaiseBudget()], SYSTEM)
        assert refused.value.code == "run_not_resumable"
        with pytest.raises(RunRefused, match="no approval 'appr-other'") as refused:
            await verbs.resume(paused["run_id"], [Reject(approval_id="appr-other")], SYSTEM)
        assert refused.value.code == "unknown_approval"
        assert hub.calls == [("balance", {})]  # nothing decided, nothing ran

        llm.add_text("Paid Bob 12.")
        run = await verbs.resume(
            paused["run_id"],
            [Approve(approval_id=approval["approval_id"], arguments={"to": "bob", "amount": 12})],
            SYSTEM,
        )
        assert isinstance(run, QueryRun)
        answer = await run.result()
        assert answer.status == "completed" and answer.answer == "Paid Bob 12."
        assert answer.run_id == paused["run_id"]
        assert ("transfer", {"to": "bob", "amount": 12}) in hub.calls  # the edited arguments ran

        with pytest.raises(RunRefused, match="already decided: approved") as refused:
            await verbs.resume(paused["run_id"], [Approve(approval_id=approval["approval_id"])], SYSTEM)
        assert refused.value.code == "approval_decided"


async def test_an_unknown_run_is_refused_by_name(llm: ScriptedOpenAIServer) -> None:
    async with bank(llm) as hub:
        verbs = RunVerbs(hub.master.services.entry, hub.master.services.approvals)
        with pytest.raises(RunRefused, match="no run 'run-nope'") as refused:
            await verbs.resume("run-nope", [RaiseBudget()], SYSTEM)
        assert refused.value.code == "unknown_run"


CLOCK = {
    "type": "function",
    "function": {"name": "local_time", "parameters": {"type": "object", "properties": {}}},
}


async def test_a_run_paused_for_its_clients_tools_resumes_by_its_id_with_their_results(
    llm: ScriptedOpenAIServer,
) -> None:
    """An OpenAI client's tool results are :class:`ToolResult` decisions: the run that handed out
    the calls goes on under its id; results of calls no run of that id waits for are refused."""
    async with bank(llm) as hub:
        verbs = RunVerbs(hub.master.services.entry, hub.master.services.approvals)
        call_id = f"call_{uuid.uuid4().hex}"
        llm.add_tool_calls([ToolCall("local_time", {}, call_id)])
        asked = QueryRequest(query="what time is it?")
        paused = await verbs.start(asked, SYSTEM, extras=RunExtras(client_tools=[CLOCK])).result()
        assert paused.status == "awaiting_tool_results" and paused.run_id is not None, paused
        assert await verbs.run_of_calls([call_id]) == paused.run_id

        with pytest.raises(RunRefused, match="not of the calls run 'run-other'") as refused:
            await verbs.resume("run-other", [ToolResult(call_id=call_id, content="10:30")], SYSTEM)
        assert refused.value.code == "validation_error"

        llm.add_text("It is 10:30.")
        run = await verbs.resume(
            paused.run_id,
            [ToolResult(call_id=call_id, content="10:30")],
            SYSTEM,
            asked=(asked, RunExtras(client_tools=[CLOCK]), None),
        )
        assert isinstance(run, QueryRun)
        answer = await run.result()
        assert (answer.answer, answer.run_id) == ("It is 10:30.", paused.run_id)
        told = [m["content"] for m in llm.requests[-1]["messages"] if m.get("role") == "tool"]
        assert told == ["10:30"]
        assert await verbs.run_of_calls([call_id]) is None  # taken: nothing waits for it any more
