"""The WebSocket ``cancel`` frame of a query client (:class:`protocol.Cancel`).

A query client names one of its queries still in flight on this connection (``query_id``) or any
run (``run_id``); the run is cancelled through the one cancel of every door
(:meth:`master.query.entry.QueryEntry.cancel`: tenant-scoped, on whichever master holds it, a
paused run too). The answer is a ``cancel_result`` with the run's state after it, or an ``error``
whose ``ref`` is the ``query_id`` or ``run_id`` the frame named.
"""

from __future__ import annotations

from collections.abc import Mapping

from master.auth import Principal
from master.query.entry import CancelRefused, QueryEntry, QueryRun
from protocol import Cancel, CancelResult, ErrorCode, ErrorMessage

LOCAL_REASON = "cancelled by a client (a WebSocket cancel frame)"


async def answer_cancel(
    entry: QueryEntry, principal: Principal, msg: Cancel, in_flight: Mapping[str, QueryRun]
) -> str:
    """The frame that answers ``msg`` (``in_flight``: the connection's queries by ``query_id``)."""
    run: QueryRun | None = None
    if msg.query_id is not None:
        run = in_flight.get(msg.query_id)
        if run is None:
            return ErrorMessage(
                code=ErrorCode.UNKNOWN_RUN,
                message=f"no query {msg.query_id!r} of this connection is in flight (answered already, "
                "or never sent here): cancel a run of another connection by its run_id",
                ref=msg.query_id,
            ).model_dump_json()
        run_id = run.run_id
    else:
        assert msg.run_id is not None  # the frame names one of the two
        run_id = msg.run_id
    try:
        record = await entry.cancel(run_id, principal=principal, door="websocket")
    except CancelRefused as exc:
        if run is not None and exc.code == ErrorCode.UNKNOWN_RUN:  # this connection's, not recorded yet
            run.cancel(LOCAL_REASON)
            return CancelResult(
                run_id=run_id, query_id=msg.query_id, state="cancelled", reason=LOCAL_REASON
            ).model_dump_json()
        return ErrorMessage(
            code=exc.code, message=exc.message, ref=msg.query_id or msg.run_id
        ).model_dump_json()
    return CancelResult(
        run_id=run_id, query_id=msg.query_id, state=str(record["state"]), reason=record.get("reason")
    ).model_dump_json()
