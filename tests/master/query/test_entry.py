"""The query entry: admission, events in order then the outcome, a run that outlives its door.

Every door's outcomes, through the real app: tests/master/routes/test_query_doors.py.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from master.auth import SYSTEM
from master.errors import QueryRejected
from master.orchestration.orchestrator import EventSink
from master.query.admission import Admission
from master.query.entry import QueryEntry
from master.query.events import Finished, Progress, QueryEvent, QueryRefused
from protocol import QueryRequest, QueryResponse, StepEvent, TokenEvent


class FakeService:
    """Stands in for :class:`QueryService` (same ``run`` signature)."""

    def __init__(self, outcome: str = "ok") -> None:
        self.outcome = outcome
        self.release = asyncio.Event()
        self.finished = asyncio.Event()
        self.runs = 0

    async def run(
        self, request: QueryRequest, query_id: str, events: EventSink | None = None, **_: object
    ) -> QueryResponse:
        self.runs += 1
        if events is not None:
            events(StepEvent(step=1, tool_calls=["a__t"]))
        await self.release.wait()
        if events is not None:
            events(TokenEvent(text="Hel"))
            events(TokenEvent(text="lo"))
        self.finished.set()
        if self.outcome == "rejected":
            raise QueryRejected("invalid_model", "model 'x' is not allowed")
        if self.outcome == "crash":
            raise RuntimeError("bug")
        return QueryResponse(query_id=query_id, session_id="s", success=True, answer="Hello")


def entry(service: FakeService, limit: int = 4) -> QueryEntry:
    return QueryEntry(service, Admission(limit))  # type: ignore[arg-type]


def shape(events: list[QueryEvent]) -> list[str]:
    return [e.type if isinstance(e, Progress) else "finished" for e in events]


@pytest.mark.parametrize(
    ("outcome", "last"),
    [
        ("ok", {"success": True, "answer": "Hello"}),
        ("rejected", {"success": False, "error_code": "invalid_model", "error": "model 'x' is not allowed"}),
        ("crash", {"success": False, "error_code": "internal_error"}),
    ],
)
async def test_events_in_order_then_the_outcome(
    outcome: str, last: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    service = FakeService(outcome)
    service.release.set()
    owner = entry(service)
    run = owner.submit(QueryRequest(query="hi"), principal=SYSTEM, door="sse", query_id="q1", stream=True)
    with caplog.at_level(logging.ERROR, "master.query.entry"):
        events = [event async for event in run.events()]
    assert shape(events) == ["step", "token", "token", "finished"]
    assert isinstance(events[-1], Finished)
    response = events[-1].response.model_dump()
    assert response["query_id"] == "q1" and last.items() <= response.items()
    assert (await run.result()) == events[-1].response
    assert owner.admission.in_flight == 0  # the slot is given back whatever the outcome
    assert ("query q1 (sse) failed" in caplog.text) == (outcome == "crash")
    await owner.aclose()


async def test_a_refused_query_runs_nothing_and_names_its_cap() -> None:
    service = FakeService()
    owner = entry(service, limit=1)
    held = owner.submit(QueryRequest(query="hi"), principal=SYSTEM, door="http")
    with pytest.raises(QueryRefused) as refused:
        owner.submit(QueryRequest(query="hi"), principal=SYSTEM, door="websocket")
    assert refused.value.code == "too_many_queries"
    assert "OPENAGENT_MAX_QUERIES_IN_FLIGHT=1" in refused.value.message
    owner.admission.close("the master is stopping")
    with pytest.raises(QueryRefused) as draining:
        owner.submit(QueryRequest(query="hi"), principal=SYSTEM, door="sse")
    assert (draining.value.code, draining.value.message) == ("draining", "the master is stopping")
    service.release.set()
    assert (await held.result()).success
    assert service.runs == 1 and owner.admission.in_flight == 0


async def test_a_door_that_goes_away_does_not_stop_the_run() -> None:
    service = FakeService()
    owner = entry(service)
    run = owner.submit(QueryRequest(query="hi"), principal=SYSTEM, door="sse", stream=True)
    body = run.events()
    first = await anext(body)
    assert isinstance(first, Progress) and first.type == "step"
    await body.aclose()  # the client disconnected mid-stream
    waiting = asyncio.create_task(run.result())
    await asyncio.sleep(0)
    waiting.cancel()  # a door that stops waiting for the result
    service.release.set()
    async with asyncio.timeout(30):
        await service.finished.wait()  # the run went on to its end
        assert (await run.result()).success
    await owner.aclose()


async def test_aclose_cancels_runs_in_flight_and_ends_their_events() -> None:
    service = FakeService()
    owner = entry(service)
    run = owner.submit(QueryRequest(query="hi"), principal=SYSTEM, door="sse", stream=True)
    body = run.events()
    await anext(body)
    await owner.aclose()
    assert not service.finished.is_set() and owner.admission.in_flight == 0
    assert [event async for event in body] == []  # no outcome, but the stream ends


async def test_the_slot_is_held_until_the_outcome_is_delivered() -> None:
    """A draining master hands WebSocket connections off once nothing is in flight: the answer
    must have been sent by then."""
    service = FakeService()
    service.release.set()
    owner = entry(service)
    delivering = asyncio.Event()
    sent = asyncio.Event()
    delivered: list[QueryResponse] = []
    ended: list[str] = []

    async def deliver(response: QueryResponse) -> None:
        delivering.set()
        await sent.wait()
        delivered.append(response)

    run = owner.submit(
        QueryRequest(query="hi"), principal=SYSTEM, door="websocket", query_id="q1", deliver=deliver
    )
    over = asyncio.Event()
    run.on_done(lambda: (ended.append("done"), over.set()))
    async with asyncio.timeout(30):
        await delivering.wait()
    assert owner.admission.in_flight == 1 and not ended
    sent.set()
    assert (await run.result()).answer == "Hello"
    assert [r.query_id for r in delivered] == ["q1"] and owner.admission.in_flight == 0
    async with asyncio.timeout(30):
        await over.wait()
    assert ended == ["done"]


async def test_every_waiting_door_gets_the_runs_outcome() -> None:
    """``result()``: the first door waits on what the run settles as it ends, a second one on the
    run itself; either gets the answer, the error the run ended with, or its cancellation, and a
    door that gives up does not stop the run."""
    service = FakeService()
    owner = entry(service)
    run = owner.submit(QueryRequest(query="hi"), principal=SYSTEM, door="http")
    first, second = asyncio.create_task(run.result()), asyncio.create_task(run.result())
    await asyncio.sleep(0)  # both wait
    service.release.set()
    async with asyncio.timeout(30):
        assert [r.answer for r in await asyncio.gather(first, second)] == ["Hello", "Hello"]
    assert (await run.result()).answer == "Hello"  # after the end: the run's own outcome

    async def broken(_: QueryResponse) -> None:
        raise ConnectionError("the door's socket is gone")

    failing = owner.submit(QueryRequest(query="hi"), principal=SYSTEM, door="websocket", deliver=broken)
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(failing.result(), timeout=30)

    service.release.clear()
    stopped = owner.submit(QueryRequest(query="hi"), principal=SYSTEM, door="http")
    waiting = asyncio.create_task(stopped.result())
    await asyncio.sleep(0)
    stopped.cancel()  # the run is stopped (its client cancelled it, or the master stops)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, timeout=30)
    await owner.aclose()
