"""``CancelTask`` through the one cancel of every door (:meth:`master.query.entry.QueryEntry.cancel`).

A task answered by a run names it in its metadata (:data:`~master.runs.a2a_tasks.RUN_ID_KEY`).
``CancelTask`` of a ``WORKING`` task cancels that run, on whichever master holds it; that
master's executor then ends the task ``CANCELED`` (a run cancelled answers ``run_cancelled``),
which the cancel waits for (:func:`ended`). A task waiting for approvals is written ``CANCELED``
by the SDK, then its paused run is cancelled (its approvals withdrawn, it never resumes). A task
without a recorded run (a direct call, a run being accepted) is the SDK's cancel alone: the
master running it stops it (:meth:`master.doors.a2a.executor.HubExecutor.abandon`).
"""

from __future__ import annotations

import asyncio
import logging

from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import Task

from master.auth import Principal
from master.query.entry import CancelRefused, QueryEntry
from master.runs.a2a_tasks import RUN_ID_KEY, TERMINAL_STATES, RedisTaskStore
from protocol import ErrorCode

logger = logging.getLogger("master.doors.a2a")

SETTLE_SECONDS = 10.0
"""How long ``CancelTask`` waits for the master whose run it cancelled to end the task."""


async def cancel_run(entry: QueryEntry, task: Task, principal: Principal) -> bool:
    """Cancel the run of ``task`` for ``principal``; ``False`` when it names no run the core
    could cancel (none, not recorded yet, finished)."""
    run_id = str(task.metadata[RUN_ID_KEY]) if RUN_ID_KEY in task.metadata else ""
    if not run_id:
        return False
    try:
        await entry.cancel(run_id, principal=principal, door="a2a")
    except CancelRefused as exc:
        if exc.code != ErrorCode.UNKNOWN_RUN:
            logger.info("A2A task %s: its run was not cancelled: %s", task.id, exc.message)
        return False
    return True


async def ended(
    store: RedisTaskStore, task_id: str, context: ServerCallContext, seconds: float = SETTLE_SECONDS
) -> Task | None:
    """The task once it is ``CANCELED`` (or another terminal state), waiting at most ``seconds``
    for the master whose run was cancelled to write it; ``None`` after that."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        stored = await store.get(task_id, context)
        if stored is None or stored.task.status.state in TERMINAL_STATES:
            return stored.task if stored is not None else None
        if asyncio.get_running_loop().time() >= deadline:
            return None
        await asyncio.sleep(0.05)
