"""The AG-UI door: ``POST /ag-ui`` runs a query and streams AG-UI events (Server-Sent Events).

A run is a query through :meth:`master.query.entry.QueryEntry.submit` (door ``agui``):
admission, budgets, the session, approvals and metrics are the entry's. The door translates
(:mod:`.wire` reads the ``RunAgentInput``, :mod:`.events` writes the events):

- the ``threadId`` is the hub's session (a new thread starts a session of that id);
- a tool call that needs a person's approval ends the run with an ``interrupt`` outcome, one
  interrupt per approval (its id is the approval's); the next input on the thread carries
  ``resume`` entries, which decide those approvals through the
  run's verb (:meth:`~master.query.verbs.RunVerbs.resume`), as ``POST /approvals/{approval_id}``
  and every other door do, then the paused run goes on and streams as a new run;
- as the spec asks, a thread whose interrupts are open takes only a ``resume`` that answers every
  one of them, and refusals of the input come as ``RUN_ERROR``.

What is refused before anything is streamed (a body that is not a ``RunAgentInput``, a caller
nothing resolved, the master full or draining) is an HTTP error, raised by the route.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from ag_ui.core import BaseEvent, RunAgentInput, RunErrorEvent, RunStartedEvent
from ag_ui.encoder import EventEncoder

from master.auth import Principal, Scope
from master.doors.agui.events import RunEvents
from master.doors.agui.wire import Decision, InputError, read_input, translate
from master.query.approvals import ApprovalDesk, ApprovalRefused
from master.query.entry import QueryEntry, QueryRun, check_resolved
from master.query.events import Finished
from master.query.verbs import RunRefused, RunVerbs, start_or_bring
from master.runs.decisions import Approve, Reject
from protocol import Approval, ErrorCode, QueryResponse

Events = AsyncIterator[bytes]
"""The body of the answer: AG-UI events, encoded as Server-Sent Events."""

_ENCODER = EventEncoder()


class AgUiDoor:
    """Answers ``POST /ag-ui`` through the query entry (see the module docstring)."""

    def __init__(self, entry: QueryEntry, approvals: ApprovalDesk | None) -> None:
        self._entry = entry
        self._approvals = approvals

    @staticmethod
    def read(raw: bytes) -> RunAgentInput:
        """The body, read; raises :class:`~master.doors.agui.wire.InputError`."""
        return read_input(raw)

    async def start(self, run: RunAgentInput, principal: Principal) -> Events:
        """Start the run the input asks for; its events. Raises
        :class:`~master.query.events.QueryRefused` when nothing may run (``unauthorized``,
        ``too_many_queries``, ``draining``)."""
        check_resolved(principal)
        try:
            asked = translate(run)
            if asked.query is None:
                return await self._resume(run, asked.decisions, principal)
            waiting = await self._open_interrupts(run.thread_id, principal)
            if waiting:
                raise InputError(
                    ErrorCode.INVALID_QUERY,
                    f"thread {run.thread_id!r} has open interrupts ({', '.join(waiting)}): send a "
                    "resume that answers each of them before new input",
                )
        except InputError as exc:
            return _failed(run, exc.code, exc.message)
        except ApprovalRefused as exc:
            return _failed(run, exc.code, str(exc))
        query = asked.query.model_copy(update={"stream": True})
        verbs = RunVerbs(self._entry, self._approvals)
        started = await start_or_bring(
            verbs, (query, asked.extras, None), principal, door="agui", stream=True
        )
        return _stream(RunEvents(run.thread_id, run.run_id, run.state), started)

    async def _open_interrupts(self, thread_id: str, principal: Principal) -> list[str]:
        if self._approvals is None:
            return []
        return [a.approval_id for a in await self._approvals.pending(thread_id, Scope.of(principal))]

    async def _resume(self, run: RunAgentInput, decisions: list[Decision], principal: Principal) -> Events:
        """Decide the thread's approvals as ``resume`` says, then go on with its paused run."""
        desk = self._approvals
        if desk is None:
            raise InputError(ErrorCode.INVALID_QUERY, "this master keeps no approvals: nothing to resume")
        scope, thread = Scope.of(principal), run.thread_id
        open_ids = set(await self._open_interrupts(thread, principal))
        given = [decision.approval_id for decision in decisions]
        if missing := sorted(open_ids - set(given)):
            raise InputError(
                ErrorCode.VALIDATION_ERROR,
                f"resume must answer every open interrupt of thread {thread!r}; missing: {', '.join(missing)}",
            )
        if len(set(given)) != len(given):
            raise InputError(ErrorCode.VALIDATION_ERROR, "resume answers an interrupt more than once")
        for decision in decisions:
            try:
                record = await desk.record(decision.approval_id, scope)
            except ApprovalRefused as exc:
                raise InputError(exc.code, f"interrupt {decision.approval_id!r}: {exc}") from None
            if record.get("session_id") != thread:
                raise InputError(
                    ErrorCode.VALIDATION_ERROR,
                    f"interrupt {decision.approval_id!r} is not of thread {thread!r}: resume it on its own thread",
                )
        verbs = RunVerbs(self._entry, desk)
        try:  # an interrupt decided already (a replay, or decided elsewhere): that decision stands
            run_id = await verbs.run_of(decisions[0].approval_id, principal) if decisions else ""
            started = await verbs.resume(
                run_id,
                [_decision(d) for d in decisions],
                principal,
                door="agui",
                stream=True,
                decided_stands=True,
            )
            decided = [Approval.model_validate(await desk.record(d.approval_id, scope)) for d in decisions]
        except (RunRefused, ApprovalRefused) as exc:
            raise InputError(exc.code, str(exc)) from None
        events = RunEvents(thread, run.run_id, run.state, resumed=decided)
        if isinstance(started, QueryResponse):  # still waiting, or resumed by another decision
            return _events(_started(run), events.translate(Finished(started)))
        return _stream(events, started)


def _decision(decision: Decision) -> Approve | Reject:
    """A ``resume`` entry as the run's verb takes it."""
    if decision.decision == "approve":
        return Approve(
            approval_id=decision.approval_id,
            arguments=decision.arguments,
            message=decision.message,
            remember=decision.remember,
        )
    return Reject(approval_id=decision.approval_id, reason=decision.message)


def _started(run: RunAgentInput) -> RunStartedEvent:
    return RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id)


async def _events(*sent: BaseEvent | Iterable[BaseEvent]) -> Events:
    for part in sent:
        for event in [part] if isinstance(part, BaseEvent) else part:
            yield _ENCODER.encode(event).encode()


def _failed(run: RunAgentInput, code: ErrorCode | str, message: str) -> Events:
    """A run refused after all: ``RUN_STARTED`` then ``RUN_ERROR`` (the spec's only error event)."""
    return _events(_started(run), RunErrorEvent(message=message, code=str(code)))


async def _stream(events: RunEvents, run: QueryRun) -> Events:
    """The run's events as they happen; a run cancelled before its end (the master stopping)
    ends with ``RUN_ERROR``."""
    yield _ENCODER.encode(RunStartedEvent(thread_id=events.thread_id, run_id=events.run_id)).encode()
    async for event in run.events():
        for out in events.translate(event):
            yield _ENCODER.encode(out).encode()
        if isinstance(event, Finished):
            return
    error = RunErrorEvent(
        message="the master stopped before the run ended", code=str(ErrorCode.INTERNAL_ERROR)
    )
    yield _ENCODER.encode(error).encode()
