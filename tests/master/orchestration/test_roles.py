"""The coordinator's state machine with a scripted host: the phases it persists, the reviewer's
verdicts (a retry once, a fail or a second retry blocks), the reminder, a critic's disagreement
and its decision, and a resume that starts at the persisted phase."""

from __future__ import annotations

import json
from typing import Any

import pytest

from master.llm.model import ChatMessage, ChatResult, ToolCallRequest
from master.orchestration.roles import Coordinator, CoordinatorState
from protocol import RunEvent

TWO = {"subtasks": [{"task": "one", "criteria": ["a"]}, {"task": "two"}]}


def call(name: str, arguments: dict[str, Any]) -> ChatResult:
    return ChatResult(content=None, tool_calls=[ToolCallRequest("c1", name, json.dumps(arguments))])


def verdict(name: str, reason: str = "") -> ChatResult:
    return call("submit_review", {"verdict": name, "reason": reason or name})


class Host:
    """Plays the roles' replies in order; records what the coordinator does."""

    def __init__(self, replies: list[ChatResult], answers: list[str | None] | None = None) -> None:
        self.replies = replies
        self.answers = answers if answers is not None else ["done"] * 10
        self.asked: list[str] = []
        self.executed: list[tuple[int, str]] = []
        self.phases: list[str] = []
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.tool_names = ["works__step"]

    async def ask(self, role: str, messages: list[ChatMessage], tool: dict[str, Any]) -> ChatResult:
        self.asked.append(role)
        return self.replies.pop(0)

    async def execute(self, request: str, subtask: int) -> str | None:
        self.executed.append((subtask, request))
        return self.answers.pop(0)

    async def persist(self, state: CoordinatorState) -> None:
        self.phases.append(state.phase)

    def emit(self, event: RunEvent) -> None:
        self.events.append((event.type, event.model_dump(mode="json")))

    async def escalate(self, state: CoordinatorState) -> str:
        return "appr-1"


async def test_plan_execute_review_each_subtask_persisting_every_transition() -> None:
    host = Host([call("submit_plan", TWO), verdict("pass"), verdict("needs_retry", "more"), verdict("pass")])
    state = await Coordinator(host, "q", ["planner", "executor", "reviewer"]).run(CoordinatorState())
    assert state.phase == "complete" and state.answer == "1. one\ndone\n\n2. two\ndone"
    assert [s.attempts for s in state.subtasks] == [1, 2]
    assert host.phases == [
        "plan", "dispatch",
        "execute", "review_step", "next_subtask",
        "dispatch", "execute", "review_step", "dispatch", "execute", "review_step", "next_subtask",
        "complete",
    ]  # fmt: skip
    assert "A reviewer sent your previous attempt back: more" in host.executed[-1][1]
    assert [e for e, _ in host.events].count("verdict") == 3


@pytest.mark.parametrize(
    ("reviews", "reason"),
    [
        ([verdict("fail", "impossible")], "failed review: impossible"),
        (
            [verdict("needs_retry"), verdict("needs_retry", "again")],
            "still needs a retry after 2 attempts: again",
        ),
        ([ChatResult(content="fine"), ChatResult(content="fine!")], "without calling submit_review"),
    ],
)
async def test_a_run_blocks(reviews: list[ChatResult], reason: str) -> None:
    host = Host([call("submit_plan", TWO), *reviews])
    state = await Coordinator(host, "q", ["planner", "executor", "reviewer"]).run(CoordinatorState())
    assert state.phase == "blocked" and reason in (state.reason or "")
    assert [s.status for s in state.subtasks] == [
        "failed" if "failed review" in reason else "blocked",
        "pending",
    ]


async def test_a_planner_without_its_tool_is_reminded_once() -> None:
    host = Host([ChatResult(content="a plan in words"), call("submit_plan", {"subtasks": [{"task": "x"}]})])
    state = await Coordinator(host, "q", ["planner", "executor"]).run(CoordinatorState())
    assert state.phase == "complete" and host.asked == ["planner", "planner"]  # no reviewer: passes


async def test_a_critics_disagreement_escalates_and_a_person_decides() -> None:
    host = Host([call("submit_plan", TWO), verdict("pass"), verdict("fail", "wrong")])
    coordinator = Coordinator(host, "q", ["planner", "executor", "reviewer", "critic"])
    state = await coordinator.run(CoordinatorState())
    assert state.phase == "escalated" and state.pending is not None and state.pending.approval_id == "appr-1"
    assert state.pending.critic.verdict == "fail"

    approved = state.model_copy(deep=True)
    coordinator.decide(approved, "approved")
    assert approved.phase == "next_subtask" and approved.subtasks[0].verdicts[-1].role == "person"
    rejected = state.model_copy(deep=True)
    coordinator.decide(rejected, "rejected")
    assert rejected.phase == "blocked" and "failed review" in (rejected.reason or "")
    expired = state.model_copy(deep=True)
    coordinator.decide(expired, "expired")
    assert expired.phase == "blocked" and "in time" in (expired.reason or "")


async def test_a_resume_starts_at_the_persisted_phase_without_rerunning_a_passed_subtask() -> None:
    first = Host([call("submit_plan", TWO), verdict("pass")], answers=["one done", None])
    state = await Coordinator(first, "q", ["planner", "executor", "reviewer"]).run(CoordinatorState())
    assert state.phase == "execute" and state.current == 1  # the executor stopped in sub-task 2
    persisted = CoordinatorState.model_validate(json.loads(state.model_dump_json()))

    second = Host([verdict("pass")], answers=["two done"])
    done = await Coordinator(second, "q", ["planner", "executor", "reviewer"]).run(persisted)
    assert done.phase == "complete" and [i for i, _ in second.executed] == [1]
    assert [s.attempts for s in done.subtasks] == [1, 1]
    assert second.asked == ["reviewer"]
