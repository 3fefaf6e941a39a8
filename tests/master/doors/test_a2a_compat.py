"""The A2A door for clients in their default settings: 0.3 and 1.0 cards, discovery under ``/a2a``,
the trailing slash, the spec's errors for a wrong media type and an unknown task status, the
cards' cache headers, and an ``a2a-sdk`` 0.3 client in its own process (the 0.3 SDK conflicts
with the 1.x of the virtualenv: scripts/_common.sh ``a2a_v03_client_deps`` installs it apart).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3.types import AgentCard as AgentCard03
from a2a.types.a2a_pb2 import ListTasksRequest, Message, Part, Role, TaskState
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError

from openagent.testing import ScriptedOpenAIServer
from tests.master.doors.test_a2a_server import KEY, a2a_client, agent_url, final_task, hub, send, text_message

ROOT = Path(__file__).resolve().parents[3]
V03_SDK = ROOT / ".venv" / "a2a-sdk-0.3"
V03_CLIENT = Path(__file__).with_name("a2a_v03_client.py")
BINDINGS = [TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value]


def file_message() -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id="file-part",
        parts=[Part(raw=b"tck", media_type="application/x-unsupported")],
    )


async def test_cards_speak_both_versions_and_are_cached(llm: ScriptedOpenAIServer) -> None:
    async with (
        hub(llm) as (master, _),
        httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http,
    ):
        hub_url = f"{master.base_url}/a2a"
        for base in (master.base_url, hub_url, agent_url(master)):
            response = await http.get(f"{base}/.well-known/agent-card.json")
            assert response.status_code == 200, response.text
            card = response.json()
            endpoint = agent_url(master) if base == agent_url(master) else hub_url
            # 0.3: the primary interface and the other binding, validated by the SDK's 0.3 model.
            assert AgentCard03.model_validate(card).url == endpoint
            assert (card["preferredTransport"], card["protocolVersion"]) == ("JSONRPC", "0.3.0")
            assert card["additionalInterfaces"] == [{"transport": "HTTP+JSON", "url": endpoint}]
            # 1.0: both bindings, in 1.0 first.
            assert [(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]] == [
                ("JSONRPC", "1.0"),
                ("HTTP+JSON", "1.0"),
                ("JSONRPC", "0.3.0"),
                ("HTTP+JSON", "0.3.0"),
            ]
            # Cache headers, and 304 to a matching If-None-Match (a weak one too).
            etag = response.headers["etag"]
            assert response.headers["cache-control"] == "private, max-age=60"
            assert response.headers["last-modified"].endswith("GMT")
            for tag in (etag, f"W/{etag}", f'"other", {etag}'):
                again = await http.get(f"{base}/.well-known/agent-card.json", headers={"If-None-Match": tag})
                assert again.status_code == 304 and again.headers["etag"] == etag and not again.content
            changed = await http.get(f"{base}/.well-known/agent-card.json", headers={"If-None-Match": '"x"'})
            assert changed.status_code == 200 and changed.json() == card

        # A 1.x client finds the hub's card under /a2a, and talks to it.
        llm.add_text("found under /a2a")
        async with a2a_client(hub_url) as client:
            task = final_task(await send(client, text_message("hello")))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED, task


async def test_trailing_slash_and_the_specs_errors(llm: ScriptedOpenAIServer) -> None:
    async with (
        hub(llm) as (master, _),
        httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http,
    ):
        # The card's endpoint with a trailing slash answers as without it (no 307).
        card = await A2ACardResolver(http, master.base_url).get_agent_card()
        for interface in card.supported_interfaces:
            interface.url += "/"
        for binding in BINDINGS:
            llm.add_text(f"slashed {binding}")
            config = ClientConfig(httpx_client=http, streaming=False, supported_protocol_bindings=[binding])
            client = ClientFactory(config).create(card)
            task = final_task(await send(client, text_message("hi")))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED, (binding, task)
            # A file part (unsupported media type): ContentTypeNotSupportedError, not InvalidParams.
            with pytest.raises(ContentTypeNotSupportedError, match="application/x-unsupported"):
                await send(client, file_message())
            typed = Message(
                role=Role.ROLE_USER, message_id="typed", parts=[Part(text="x", media_type="image/png")]
            )
            with pytest.raises(ContentTypeNotSupportedError, match="image/png"):
                await send(client, typed)
            # ListTasks with a status that names no task state is refused, not a list of every task.
            with pytest.raises(InvalidParamsError, match="unknown task status"):
                await client.list_tasks(ListTasksRequest(status=99))  # type: ignore[arg-type]
            await client.close()

        # The same refusals as a client that sends names the SDK's parser would drop.
        hub_url = f"{master.base_url}/a2a"
        listing = {"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": {"status": "TASK_STATE_BOGUS"}}
        answer = (await http.post(f"{hub_url}/", json=listing, headers={"A2A-Version": "1.0"})).json()
        assert answer["id"] == 7 and answer["error"]["code"] == -32602, answer
        rest = await http.get(f"{hub_url}/tasks", params={"status": "bogus"}, headers={"A2A-Version": "1.0"})
        assert rest.status_code == 400 and "unknown task status" in rest.text, rest.text
        known = await http.get(
            f"{hub_url}/tasks", params={"status": "TASK_STATE_COMPLETED"}, headers={"A2A-Version": "1.0"}
        )
        states = [task["status"]["state"] for task in known.json()["tasks"]]
        assert len(states) >= 2 and set(states) == {"TASK_STATE_COMPLETED"}, known.text
        # A body that is not JSON: -32005 on JSON-RPC, 415 on HTTP+JSON.
        plain = {"Content-Type": "text/plain", "A2A-Version": "1.0"}
        answer = (await http.post(hub_url, content=b"{'not': 'json'}", headers=plain)).json()
        assert answer["error"]["code"] == -32005, answer
        rest = await http.post(f"{hub_url}/message:send", content=b"{}", headers=plain)
        assert rest.status_code == 415, rest.text
        file_part = {
            "message": {"role": "ROLE_USER", "messageId": "f", "parts": [{"raw": "dGNr", "mediaType": "x/y"}]}
        }
        rest = await http.post(f"{hub_url}/message:send", json=file_part, headers={"A2A-Version": "1.0"})
        assert rest.status_code == 415 and rest.json()["error"]["code"] == 415, rest.text


@pytest.mark.skipif(
    not (V03_SDK / ".openagent.stamp").exists(),
    reason="the a2a-sdk 0.3 client is not installed: scripts/test.sh installs it "
    "(or: bash -c '. scripts/_common.sh; a2a_v03_client_deps')",
)
async def test_an_a2a_sdk_03_client_discovers_the_card_and_is_answered(llm: ScriptedOpenAIServer) -> None:
    async with hub(llm) as (master, _):
        llm.add_text("answer over JSON-RPC")
        llm.add_text("answer over HTTP+JSON")
        env = {**os.environ, "PYTHONPATH": str(V03_SDK)}
        process = await asyncio_subprocess(sys.executable, str(V03_CLIENT), agent_url(master), KEY, env=env)
        assert process.returncode == 0, process.stderr
        report = json.loads(process.stdout.strip().splitlines()[-1])
        assert report["url"] == agent_url(master) and report["protocol_version"] == "0.3.0"
        assert [(r["transport"], r["state"], r["answer"]) for r in report["results"]] == [
            ("JSONRPC", "completed", "answer over JSON-RPC"),
            ("HTTP+JSON", "completed", "answer over HTTP+JSON"),
        ]


async def asyncio_subprocess(*command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` off the event loop (the master under test runs on it), 120 s at most."""
    return await asyncio.to_thread(
        subprocess.run, command, env=env, capture_output=True, text=True, timeout=120, check=False
    )
