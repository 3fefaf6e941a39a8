"""SSE streams: events in order, a final query_result, and a run that outlives its reader."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from master.errors import QueryRejected
from master.orchestration.orchestrator import EventSink
from master.query.streaming import QueryStreams, sse
from protocol import QueryRequest, QueryResponse


class FakeService:
    """Stands in for :class:`QueryService` (same ``run`` signature)."""

    def __init__(self, outcome: str = "ok") -> None:
        self.outcome = outcome
        self.release = asyncio.Event()
        self.finished = asyncio.Event()

    async def run(
        self, request: QueryRequest, query_id: str, events: EventSink | None = None
    ) -> QueryResponse:
        assert events is not None
        events("step", {"step": 1, "tool_calls": ["a__t"]})
        await self.release.wait()
        events("token", {"text": "Hel"})
        events("token", {"text": "lo"})
        self.finished.set()
        if self.outcome == "rejected":
            raise QueryRejected("invalid_model", "model 'x' is not allowed")
        if self.outcome == "crash":
            raise RuntimeError("bug")
        return QueryResponse(query_id=query_id, session_id="s", success=True, answer="Hello")


def parse(chunks: list[str]) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in chunks:
        event, data = chunk.strip().split("\n")
        events.append((event.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


def streams(service: FakeService) -> QueryStreams:
    return QueryStreams(service)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("outcome", "last"),
    [
        ("ok", {"success": True, "answer": "Hello"}),
        ("rejected", {"success": False, "error_code": "invalid_model", "error": "model 'x' is not allowed"}),
        ("crash", {"success": False, "error_code": "internal_error"}),
    ],
)
async def test_events_in_order_then_the_result(outcome: str, last: dict[str, Any]) -> None:
    service = FakeService(outcome)
    service.release.set()
    owner = streams(service)
    chunks = [chunk async for chunk in owner.stream(QueryRequest(query="hi"), "q1")]
    events = parse(chunks)
    assert [name for name, _ in events] == ["step", "token", "token", "query_result"]
    assert events[-1][1]["query_id"] == "q1" and last.items() <= events[-1][1].items()
    await owner.aclose()


async def test_a_reader_that_goes_away_does_not_stop_the_run() -> None:
    service = FakeService()
    owner = streams(service)
    body = owner.stream(QueryRequest(query="hi"), "q1")
    first = await anext(body)
    assert first.startswith("event: step")
    await body.aclose()  # the client disconnected mid-stream
    service.release.set()
    async with asyncio.timeout(30):
        await service.finished.wait()  # the run went on to its end
    await owner.aclose()


async def test_aclose_cancels_runs_in_flight() -> None:
    service = FakeService()
    owner = streams(service)
    body = owner.stream(QueryRequest(query="hi"), "q1")
    await anext(body)
    await owner.aclose()
    assert not service.finished.is_set()
    await body.aclose()


def test_sse_format() -> None:
    assert sse("token", {"text": "é"}) == 'event: token\ndata: {"text": "\\u00e9"}\n\n'
