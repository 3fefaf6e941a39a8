"""The cluster router's checks of its waiting calls, with stand-ins for the directory and dispatcher."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

from master.agents.registry import Registry
from master.agents.remote import RemoteAgent
from master.cluster.router import ClusterOutbox, ClusterRouter, _message
from master.errors import ToolCallError


class Directory:
    master_id = "master-b"
    lease_seconds = 1.0

    def __init__(self, owners: dict[str, str], live: set[str]) -> None:
        self.on_tick: list[Any] = []
        self.owners, self.live = owners, live

    def owner(self, agent_id: str) -> str | None:
        return self.owners.get(agent_id)

    def alive(self, master_id: str) -> bool:
        return master_id in self.live


class Dispatcher:
    def __init__(self) -> None:
        self.errors: dict[str, ToolCallError | None] = {}

    def settle_remote(self, call_id: str, *, result: Any = None, error: ToolCallError | None = None) -> bool:
        self.errors[call_id] = error
        return True


def test_a_call_fails_at_the_heartbeat_that_sees_its_agent_registered_on_a_third_master() -> None:
    directory = Directory({"moved": "master-c", "stayed": "master-a"}, {"master-a", "master-b", "master-c"})
    dispatcher = Dispatcher()
    outbox = ClusterOutbox(cast(Any, None), cast(Any, directory))
    outbox.waiting.update(
        {
            "call-1": RemoteAgent("moved", "master-a", "action", {}, {}),
            "call-2": RemoteAgent("stayed", "master-a", "action", {}, {}),
        }
    )
    router = ClusterRouter(cast(Any, None), cast(Any, directory), cast(Any, dispatcher), Registry(), outbox)
    router._check_owners()  # what each heartbeat runs
    assert set(dispatcher.errors) == {"call-1"} and list(outbox.waiting) == ["call-2"]
    message = str(dispatcher.errors["call-1"])
    assert "reconnected elsewhere" in message and "'master-c'" in message and "'master-a'" in message


async def test_a_call_sent_twice_runs_once() -> None:
    """A retried ``XADD`` (its reply lost) delivers the call twice: the holder serves it once."""
    directory = Directory({}, {"master-a", "master-b"})
    outbox = ClusterOutbox(cast(Any, None), cast(Any, directory))
    router = ClusterRouter(cast(Any, None), cast(Any, directory), cast(Any, Dispatcher()), Registry(), outbox)
    served: list[dict[str, Any]] = []

    async def serve(message: dict[str, Any]) -> None:
        served.append(message)

    router._serve = serve  # type: ignore[method-assign]
    message = b'{"kind":"call","call_id":"c1","origin":"master-a","agent_id":"x","tool_name":"t","timeout":5,"arguments":{"text":"h\\u00e9"}}'
    for _ in range(2):
        router._handle(_message(["m", message.decode()]))
    await asyncio.gather(*router._serving)
    assert len(served) == 1 and served[0]["arguments"] == {"text": "h\u00e9"}
    assert _message([b"m", message])["arguments"] == {"text": "h\u00e9"}  # bytes (decode_responses off)


async def test_a_posted_call_reads_as_older_masters_read_it() -> None:
    """The arguments, encoded once by the caller, are spliced into the message: a master of an
    earlier version (``json.loads(fields["m"])``) reads the same call during a rolling upgrade."""
    directory = Directory({}, {"master-a", "master-b"})
    outbox = ClusterOutbox(cast(Any, None), cast(Any, directory))
    written: list[tuple[Any, ...]] = []

    class Writes:
        async def command(self, *words: Any) -> None:
            written.append(words)

    outbox._writes = cast(Any, Writes())
    await outbox.post("master-a", {"kind": "call", "call_id": "c1"}, arguments=b'{"a":1,"b":[2,3]}')
    [words] = written
    fields = list(words[words.index("*") + 1 :])
    assert fields[0] == "m" and len(fields) == 2
    assert json.loads(fields[1]) == {"kind": "call", "call_id": "c1", "arguments": {"a": 1, "b": [2, 3]}}
