"""An ``a2a-sdk`` 0.3 client, run by tests/master/doors/test_a2a_compat.py in its own process.

The 0.3 SDK and the 1.x of the project's virtualenv cannot share one environment: the test runs
this script with the 0.3 SDK first on ``PYTHONPATH`` (installed by ``a2a_v03_client_deps`` in
scripts/_common.sh). It discovers the card at URL with the SDK's resolver, then sends a text
message on each binding (``JSONRPC`` plain, ``HTTP+JSON`` streamed) and prints what came back
as one JSON line.

    python a2a_v03_client.py URL KEY
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, Task, TextPart


async def ask(
    http: httpx.AsyncClient, card: Any, transport: str, streaming: bool, text: str
) -> dict[str, Any]:
    config = ClientConfig(httpx_client=http, streaming=streaming, supported_transports=[transport])
    client = ClientFactory(config).create(card)
    message = Message(role=Role.user, message_id=uuid.uuid4().hex, parts=[Part(root=TextPart(text=text))])
    task: Task | None = None
    events = 0
    async for event in client.send_message(message):
        events += 1
        if isinstance(event, tuple):
            task = event[0]
    assert task is not None, "no task came back"
    answer = "".join(
        part.root.text
        for artifact in task.artifacts or []
        for part in artifact.parts
        if isinstance(part.root, TextPart)
    )
    return {"transport": transport, "state": task.status.state.value, "answer": answer, "events": events}


async def main(url: str, key: str) -> None:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        results = [
            await ask(http, card, "JSONRPC", False, "first question"),
            await ask(http, card, "HTTP+JSON", True, "second question"),
        ]
    report = {
        "name": card.name,
        "url": card.url,
        "preferred_transport": card.preferred_transport,
        "protocol_version": card.protocol_version,
        "results": results,
    }
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
