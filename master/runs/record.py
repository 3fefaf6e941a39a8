"""A run's record: the run as this master holds it (:class:`LiveRun`), the record as stored in
Redis (``run:{run_id}``, one JSON string: :func:`row_of`, :func:`read_row`), as ``GET
/runs/{run_id}`` shows it (:func:`shown`), and the Lua scripts that rewrite it in place.

:class:`~master.runs.store.RunStore` writes and reads the records, and holds the lease.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from master.agents.calls import ToolRun
from master.runs.state import RunState, RunStatus
from master.storage.json_bytes import dump_json

_JSON_FIELDS = ("completed", "in_flight", "unknown")

# Marks a running run failed when its lease is still the one the caller found lost; its calls in
# flight become unknown. KEYS: run, running set; ARGV: lease token, reason, now, run id.
MARK_LOST = """
local raw = redis.call('GET', KEYS[1])
if not raw then
  redis.call('SREM', KEYS[2], ARGV[4])
  return 0
end
local run = cjson.decode(raw)
if run.state ~= 'running' or run.lease ~= ARGV[1] then return 0 end
local unknown = {}
for _, call in ipairs(type(run.unknown) == 'table' and run.unknown or {}) do table.insert(unknown, call) end
for _, call in ipairs(type(run.in_flight) == 'table' and run.in_flight or {}) do table.insert(unknown, call) end
run.state, run.reason, run.updated_at = 'failed', ARGV[2], tonumber(ARGV[3])
run.unknown, run.in_flight = unknown, {}
redis.call('SET', KEYS[1], cjson.encode(run), 'KEEPTTL')
redis.call('SREM', KEYS[2], ARGV[4])
return 1
"""

# Writes a run's record running. KEYS: run, running set; ARGV: record, TTL, run id.
SET_RUNNING = """
redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))
redis.call('SADD', KEYS[2], ARGV[3])
return 1
"""
"""A run's record written ``running`` and listed among the running runs: one command, where a
pipeline of the two costs redis-py about twice the CPU."""

# Takes a run in one of the given states for this master: of two callers, one wins.
# KEYS: run, running set; ARGV: holder, lease, now, run id, states...
CLAIM = """
local raw = redis.call('GET', KEYS[1])
if not raw then return {0, ''} end
local run = cjson.decode(raw)
for i = 5, #ARGV do
  if run.state == ARGV[i] then
    local was = run.state
    run.state, run.holder, run.lease, run.updated_at, run.reason = 'running', ARGV[1], ARGV[2], tonumber(ARGV[3]), ''
    redis.call('SET', KEYS[1], cjson.encode(run), 'KEEPTTL')
    redis.call('SADD', KEYS[2], ARGV[4])
    return {1, was}
  end
end
return {0, run.state}
"""


def call_of(run: ToolRun) -> dict[str, Any]:
    """A completed call as the record keeps it (its result is in the session's turns)."""
    call: dict[str, Any] = {
        "agent_id": run.agent_id,
        "tool_name": run.tool_name or run.function_name,
        "arguments": run.arguments,
        "success": run.success,
    }
    if not run.success:
        call["error"] = run.error
    return call


@dataclass(eq=False)
class LiveRun:
    """A run this master holds, as it goes (the service and the orchestrator's hooks update it)."""

    run_id: str
    query_id: str
    session_id: str | None
    tenant: str | None = None
    created_at: float = field(default_factory=time.time)
    completed: list[dict[str, Any]] = field(default_factory=list)
    in_flight: list[dict[str, Any]] = field(default_factory=list)
    """Calls sent and not answered yet: ``{"id", "name", "arguments"}`` as the model asked."""
    unknown: list[dict[str, Any]] = field(default_factory=list)
    """Calls whose outcome is unknown (in flight when an earlier part of the run was lost)."""
    checkpoint: RunState | None = None
    """What the run resumes from, when it ends resumable (set by the query service)."""
    checkpoint_stored: bool = False
    """A checkpoint of the run may be in Redis (written by :meth:`RunStore.save`, or the run was
    claimed from one): its end must write or delete it, so it cannot ride on the session's write."""
    checkpoint_calls: int = 0
    """How many calls were completed when :attr:`checkpoint` was made: a run that completed more
    since cannot resume from it without repeating them."""
    stopped_by: str | None = None
    synced: str | None = None
    """The run id written to Redis as ``running`` (``None``: never written; the id may change
    when the run turns out to continue a stored one)."""
    dirty: bool = True
    ended: bool = False
    """Its final record is written (along with the session's last turns)."""
    accepted: bool = False
    """The query service accepted its request (:meth:`RunStore.accept`): until then nothing of
    the run is written, and a refusal ends it without a record."""
    coordinator: dict[str, Any] | None = None
    """The coordinator's state of a run with roles (:mod:`master.orchestration.roles`), shown in its record."""
    announce: bool = False
    """Its door names the run before its end (a stream): written ``running`` as soon as accepted."""
    task: asyncio.Task[Any] | None = None
    """The task running it, which a cancel (:meth:`RunStore.cancel`) cancels."""
    cancelled: str | None = None
    """Why it was cancelled (``DELETE /runs/{run_id}``), once it was: it ends ``cancelled``."""

    def sending(self, calls: Iterable[tuple[str, str, Any]]) -> None:
        """Calls ``(id, function name, arguments)`` about to be sent."""
        self.in_flight = [{"id": i, "name": n, "arguments": a} for i, n, a in calls]
        self.dirty = True

    def add_unknown(self, call: dict[str, Any]) -> None:
        """A call of an earlier part of the run whose outcome is unknown (once per call id)."""
        if all(known.get("id") != call.get("id") for known in self.unknown):
            self.unknown.append(
                {"id": call.get("id"), "name": call.get("name"), "arguments": call.get("arguments")}
            )
            self.dirty = True

    def done(self, runs: Iterable[ToolRun]) -> None:
        """A round's calls came back."""
        self.completed.extend(call_of(run) for run in runs)
        self.in_flight = []
        self.dirty = True


def row_of(live: LiveRun, holder: str, lease: str, state: RunStatus, reason: str | None) -> str:
    """The record as stored, held by ``holder`` under ``lease``: one JSON string (one command to
    write, one to read)."""
    in_flight, unknown = live.in_flight, live.unknown
    if in_flight and state != "running":  # sent, never answered: unknown, never run again
        in_flight, unknown = [], [*unknown, *in_flight]
    return dumps(
        {
            "state": state,
            "holder": holder,
            "lease": lease,
            "query_id": live.query_id,
            "session_id": live.session_id,
            "tenant": live.tenant,
            "reason": reason,
            "stopped_by": live.stopped_by,
            "created_at": live.created_at,
            "updated_at": time.time(),
            "completed": live.completed,
            "in_flight": in_flight,
            "unknown": unknown,
            **({"roles": live.coordinator} if live.coordinator is not None else {}),
        }
    )


def went_past(live: LiveRun, checkpoint: RunState) -> bool:
    """Whether the run completed or sent calls its checkpoint does not know of."""
    if len(live.completed) > live.checkpoint_calls:
        return True
    known = {call.id for call in checkpoint.unknown}
    return any(str(call.get("id")) not in known for call in live.in_flight)


def dumps(value: Any) -> str:
    """A value as stored: compact JSON text."""
    return dump_json(value).decode()


def read_row(raw: Any) -> dict[str, Any] | None:
    """The stored record as a dict, ``None`` when absent or not a JSON object."""
    if not raw:
        return None
    try:
        row = json.loads(raw)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def shown(run_id: str, row: dict[str, Any]) -> dict[str, Any]:
    """The record as ``GET /runs/{run_id}`` shows it (an empty list the scripts wrote as ``{}`` is a list)."""
    record = {name: value for name, value in row.items() if name != "lease"}
    record["run_id"] = run_id
    for name in _JSON_FIELDS:
        value = row.get(name)
        record[name] = value if isinstance(value, list) else []
    for name in ("session_id", "tenant", "reason", "stopped_by", "holder", "query_id"):
        record[name] = row.get(name) or None
    return record
