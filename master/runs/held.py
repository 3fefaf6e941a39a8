"""Runs waiting for a person: their calls held as approvals, and the resume once each is decided.

:meth:`HeldRuns.hold` pauses a run whose calls the approval policy holds: one approval per call
(:class:`master.conversation.approvals.ApprovalStore`) and the run's :class:`RunState`, its
``pending`` an :class:`ApprovalPending`, in its session's pause slot. :meth:`HeldRuns.resume`
goes on once every approval is decided: the approved calls run once (with edited arguments),
the model is told of refusals and expiries. A door's direct call held for approval
(:meth:`HeldRuns.hold_direct`) is kept the same way and ends with the call, without the model.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from master.agents.calls import ToolRun
from master.agents.registry import AgentTool
from master.agents.toolbox import function_name
from master.auth import DEFAULT_TENANT, Principal, Scope
from master.conversation.approvals import ApprovalStore
from master.conversation.outcome import Outcome
from master.conversation.store import SessionStore
from master.conversation.turns import tool_turn
from master.errors import QueryRejected, SessionStoreUnavailable
from master.llm.model import ToolCallRequest
from master.runs.state import ApprovalPending, Asker, HeldCall, RunState, read_state
from master.runs.store import RunStore
from master.runs.work import UNKNOWN_CALL, RunWork, run_part, session_owner, waiting_for
from protocol import Approval, PendingToolCall, QueryResponse

logger = logging.getLogger("master.runs.held")


class HeldRuns:
    """The runs of this master's sessions that wait for approvals (module docstring)."""

    def __init__(
        self, *, sessions: SessionStore, approvals: ApprovalStore | None, runs: RunStore | None
    ) -> None:
        self.sessions = sessions
        self.approvals = approvals
        self.runs = runs

    async def hold(self, run: RunWork, outcome: Outcome) -> list[Approval]:
        """Pause a run whose calls wait for a person: one approval per held call, and the run's
        state (as a paused run of its session) to resume once every one is decided."""
        recorder = run.recorder
        owner = await session_owner(self.sessions, run.principal, recorder.session_id, run.new_session)
        calls: list[tuple[PendingToolCall, str, AgentTool]] = []
        for call in outcome.held:
            target = run.toolbox.resolve(call.name)
            assert target is not None  # held calls were resolved and validated
            agent, tool = target
            calls.append((call, agent.agent_id, tool))
        state = RunState(
            query=recorder.query,
            query_id=recorder.query_id,
            messages=run.messages or [],
            steps=outcome.steps,
            request=run.request.model_dump(mode="json", exclude={"attachments", "stream"}),
            pending=ApprovalPending(),
            **run_part(run),
        )
        approvals = await self.keep(recorder.session_id, owner, run.principal, calls, state)
        for approval in approvals:
            run.hooks.emit("approval_required", approval.model_dump(mode="json"))
        return approvals

    async def hold_direct(
        self,
        agent_id: str,
        tool: AgentTool,
        arguments: dict[str, Any],
        *,
        query_id: str,
        principal: Principal,
    ) -> QueryResponse:
        """Keep a door's direct call that :attr:`policy` holds, as the orchestrator keeps its held
        calls: one approval, in a new session owned by the asker's tenant (its first turn says
        what waits), and a paused run of kind ``direct`` that the approval desk resumes once the
        approval is decided, through any door or by the expiry sweep: the call then runs once (or
        not at all: rejected, expired), without the model (:meth:`master.query.direct.DirectCalls.resume`).
        Answers as a held query does (``status: "awaiting_approval"``, the approval)."""
        session_id = self.sessions.new_session_id()
        call = PendingToolCall(
            id=f"call-{uuid.uuid4().hex}",
            name=function_name(agent_id, tool.schema.name),
            arguments=json.dumps(arguments),
        )
        query = f"a direct call of {agent_id}.{tool.schema.name}"
        turn = {
            "query": query,
            "query_id": query_id,
            "decision": "awaiting_approval",
            "calls": [call.model_dump()],
            "ts": time.time(),
        }
        state = RunState(
            query=query,
            query_id=query_id,
            run_id=f"run-{uuid.uuid4().hex}",  # what a decision resumes (RunVerbs.resume)
            request={"query": query},
            pending=ApprovalPending(direct=True),
        )
        try:
            await self.sessions.append(session_id, [turn], owner=principal.tenant)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        approvals = await self.keep(session_id, principal.tenant, principal, [(call, agent_id, tool)], state)
        return QueryResponse(
            query_id=query_id,
            session_id=session_id,
            success=True,
            status="awaiting_approval",
            answer=waiting_for(approvals),
            approvals=approvals,
        )

    async def keep(
        self,
        session_id: str,
        owner: str,
        asker: Principal,
        calls: Sequence[tuple[PendingToolCall, str, AgentTool]],
        state: RunState,
    ) -> list[Approval]:
        """One approval per held call ``(call, agent_id, tool)``, owned by ``owner``, and the
        paused run (``state`` with its held calls and its asker in its pending item: an
        approval's unless ``state`` names another held kind) of ``session_id``, kept for as long
        as the approvals' records."""
        store = self.approvals
        assert store is not None
        now = time.time()
        approvals: list[Approval] = []
        extra: dict[str, dict[str, Any]] = {}
        held: list[HeldCall] = []
        for call, agent_id, tool in calls:
            approval = Approval(
                approval_id=f"appr-{uuid.uuid4().hex}",
                session_id=session_id,
                agent_id=agent_id,
                tool_name=tool.schema.name,
                arguments=json.loads(call.arguments or "{}"),
                created_at=now,
                expires_at=now + store.ttl_seconds,
            )
            approvals.append(approval)
            extra[approval.approval_id] = {
                "call_id": call.id,
                "parameters": tool.schema.parameters,
                "asker_key": asker.key_id,  # never the decider once the tool has approvers
                **({"run_id": state.run_id} if state.run_id else {}),  # what a decision resumes
                **({"tenant": owner} if owner != DEFAULT_TENANT else {}),
            }
            held.append(HeldCall(**call.model_dump(), approval_id=approval.approval_id))
        who = Asker(key=asker.key_id, name=asker.name, tenant=asker.tenant, admin=asker.is_admin)
        pending = state.held or ApprovalPending()
        paused = state.model_copy(
            update={
                "pending": pending.model_copy(update={"held": held, "asker": who}),
                "status": "awaiting_approval",
            }
        )
        try:
            await store.create(approvals, extra)
            await self.sessions.pause(session_id, paused.dump(), [], ttl=store.keep_seconds)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        return approvals

    async def take_direct(self, session_id: str) -> RunState:
        """Take the paused direct call of ``session_id`` to run it (of two resumes, one gets it:
        the other is refused ``invalid_query``, "resumed already")."""
        try:
            state = read_state(await self.sessions.take_paused(session_id), where=f"session {session_id}")
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if state is None or not state.direct:
            raise QueryRejected("invalid_query", "the paused run was resumed already")
        return state

    async def record_direct(self, session_id: str, run: ToolRun, owner: str) -> None:
        """Store how a held direct call ended in its session (a ``call_tool`` turn)."""
        turn = tool_turn({"query": f"a direct call of {run.label}", "ts": time.time()}, run)
        try:
            await self.sessions.append(session_id, [turn], owner=owner)
        except SessionStoreUnavailable as exc:
            logger.error("could not store the end of the direct call in session %s: %s", session_id, exc)

    async def held_run(self, session_id: str, scope: Scope) -> tuple[RunState | None, list[Approval]]:
        """The session's run paused for approvals (``None`` when there is none, or when ``scope``
        does not see the session: another tenant's) and the approvals of its round that
        ``scope`` sees, as they stand. Raises :class:`SessionStoreUnavailable`."""
        if not await self.sessions.visible(session_id, scope):
            return None, []
        state = read_state(await self.sessions.paused(session_id), where=f"session {session_id}")
        if state is None or state.held is None or self.approvals is None:
            return None, []
        found = [await self.approvals.get(call.approval_id, scope) for call in state.held.held]
        return state, [a for a in found if a is not None]

    async def decided_state(self, session_id: str, scope: Scope) -> RunState:
        try:
            state, approvals = await self.held_run(session_id, scope)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None
        if state is None:
            raise QueryRejected(
                "invalid_query", f"no run of session {session_id!r} waits for approvals (resumed already?)"
            )
        waiting = [a.approval_id for a in approvals if a.status == "pending"]
        if waiting:
            raise QueryRejected(
                "invalid_query", f"approvals {', '.join(map(repr, waiting))} are not decided yet"
            )
        return state

    async def resume(
        self, run: RunWork, tools: list[dict[str, Any]], state: RunState, *, taken: bool = False
    ) -> Outcome:
        """Go on with a run paused for approvals: the approved calls run (with the edited
        arguments), the model is told of refusals and expiries, then the next rounds. The paused
        state is taken first (of two resumes, one runs the calls) and put back, with the calls
        done so far, if the resume fails: a decision is never lost to a failure. Before an
        approved call is sent, the run's record and checkpoint hold it in flight: a resume after
        a failure (or after its master was lost) reports it as unknown and never sends it again.

        ``taken``: ``state`` is a lost run's checkpoint, claimed already (``POST /runs/.../resume``)."""
        store = self.approvals
        assert store is not None
        session_id = run.recorder.session_id
        if not taken:
            try:
                if await self.sessions.take_paused(session_id) is None:
                    raise QueryRejected("invalid_query", "the paused run was resumed already")
            except SessionStoreUnavailable as exc:
                raise QueryRejected("session_store_unavailable", str(exc)) from None
        pending = state.held
        assert pending is not None  # a run paused for approvals
        messages: list[Any] = list(state.messages)
        remaining = list(pending.held)
        for call in state.unknown:  # sent before a failure: never sent again
            messages.append({"role": "tool", "tool_call_id": call.id, "content": UNKNOWN_CALL})
            if run.live is not None:
                run.live.add_unknown(call.ref())
        decided_runs: list[ToolRun] = []
        offered = [*run.toolbox.openai_tools(), *tools] if run.extras.offer_tools else []
        sending: HeldCall | None = None
        try:
            while remaining:
                held = remaining[0]
                record = await store.record(held.approval_id, Scope.of(run.principal)) or {
                    "status": "expired"
                }
                if record.get("status") == "approved":
                    await self._before_call(run, state, messages, remaining[1:], held)
                    sending = remaining.pop(0)
                    messages.append(await self._decided_message(run, held, record, offered, decided_runs))
                    sending = None
                else:
                    messages.append(await self._decided_message(run, held, record, offered, decided_runs))
                    remaining.pop(0)
            if run.live is not None:
                run.live.checkpoint = None  # every held call answered: nothing to resume from
            run.messages = messages
            outcome = await run.orchestrator.run(
                messages=messages,
                tools=offered,
                toolbox=run.toolbox,
                model=run.model,
                auto_mode=run.request.auto_mode,
                budget=run.budget,
                hooks=run.hooks,
                steps_done=state.steps,
            )
            outcome.tool_runs[:0] = decided_runs
            return outcome
        except BaseException:
            restored = state.model_copy(
                update={
                    **run_part(run),
                    "messages": messages,
                    "pending": pending.model_copy(update={"held": remaining}),
                    "unknown": [sending] if sending is not None else [],
                }
            )
            if run.live is not None:
                run.live.checkpoint = None  # resumable through its approvals only, not twice
            try:
                await self.sessions.pause(session_id, restored.dump(), [], ttl=store.keep_seconds)
            except SessionStoreUnavailable as exc:
                logger.error("could not keep the paused run of session %s: %s", session_id, exc)
            raise

    async def _before_call(
        self,
        run: RunWork,
        state: RunState,
        messages: list[Any],
        remaining: list[HeldCall],
        held: HeldCall,
    ) -> None:
        """Record an approved call in flight, with what the run resumes from without it, before
        it is sent (awaited: a lost master must not leave it to be sent twice)."""
        live = run.live
        if live is None or self.runs is None:
            return
        live.sending([held.as_sent()])
        pending = state.held
        assert pending is not None
        checkpoint = state.model_copy(
            update={
                **run_part(run),
                "session_id": run.recorder.session_id,
                "messages": list(messages),
                "pending": pending.model_copy(update={"held": remaining}),
                "unknown": [held],
            }
        )
        try:
            await self.runs.save(live, checkpoint)
        except SessionStoreUnavailable as exc:
            raise QueryRejected("session_store_unavailable", str(exc)) from None

    async def _decided_message(
        self,
        run: RunWork,
        held: HeldCall,
        record: dict[str, Any],
        tools: list[dict[str, Any]],
        done: list[ToolRun],
    ) -> dict[str, Any]:
        """The tool message that answers a held call, as a person decided it."""
        status = record.get("status")
        call_id = held.id
        if status == "approved":
            edited = record.get("edited_arguments")
            arguments = json.dumps(edited) if edited is not None else str(held.arguments)
            call = ToolCallRequest(call_id, held.name, arguments)
            tool_run = await run.orchestrator.run_held(run.toolbox, call, run.hooks, tools)
            await (run.hooks.on_step or run.recorder.steps)([tool_run])
            done.append(tool_run)
            message = dict(tool_run.as_tool_message(call_id))
            if edited is not None:
                message["content"] = (
                    f"A person approved this call with edited arguments {arguments} "
                    f"(you asked for {held.arguments}). Result: {message['content']}"
                )
            return message
        if status == "rejected":
            reason = record.get("message") or "no reason given"
            content = f"A person refused this call; it was not run. Their reason: {reason}"
        else:
            content = (
                "No one decided on this call in time (its approval expired); it was not run. "
                "Say so in your answer."
            )
        return {"role": "tool", "tool_call_id": call_id, "content": content}
