"""The AG-UI door with the official AG-UI client: ``@ag-ui/client``'s ``HttpAgent`` (npm).

``tests/ag_ui_client/run.mjs`` is a front end in a few lines: it asks for a balance (a tool
call that runs), asks for a transfer (a call that needs approval: the run ends with an
interrupt), and answers the interrupt with the client's ``resume``; the transfer then runs
exactly once, and the approval is decided in the same record as ``POST /approvals/{id}``.

``scripts/test.sh`` installs the client (``npm ci`` in ``tests/ag_ui_client``, pinned by its lock
file); the test is skipped only where Node.js is not installed at all.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from typing import Any

import httpx
import pytest

from openagent import ClientConfig, OrchestratorActionAgent, ToolSchema
from openagent.testing import ScriptedOpenAIServer
from tests.factories import EVERY_TENANT, ROOT, in_process_master

CLIENT_DIR = ROOT / "tests" / "ag_ui_client"
KEY = "ag-ui-client-key"
DEADLINE = 60

TRANSFER = ToolSchema(
    name="transfer",
    description="Transfer money to someone",
    parameters={
        "type": "object",
        "properties": {"to": {"type": "string"}, "amount": {"type": "number"}},
        "required": ["to", "amount"],
    },
    requires_approval=True,
)
BALANCE = ToolSchema(name="balance", description="Read the balance", parameters={"type": "object"})
PAYMENT = {"to": "bob", "amount": 250}


@pytest.mark.timeout(DEADLINE * 3)
async def test_the_ag_ui_client_streams_a_tool_call_and_answers_an_approval(
    llm: ScriptedOpenAIServer,
) -> None:
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: the AG-UI client runs on it (apt-get install nodejs npm)")
    assert (CLIENT_DIR / "node_modules" / "@ag-ui" / "client").exists(), (
        f"@ag-ui/client is not installed: run scripts/test.sh, or npm ci --prefix {CLIENT_DIR}"
    )
    calls: list[tuple[str, dict[str, Any]]] = []

    async def handler(tool_name: str, arguments: dict[str, Any], *, progress_callback: Any) -> Any:
        calls.append((tool_name, arguments))
        return {"eur": 3} if tool_name == "balance" else {"sent": arguments}

    llm.add_tool_call("bank__balance", {})
    llm.add_text("You have 3 EUR.")
    llm.add_tool_call("bank__transfer", PAYMENT)
    llm.add_text("Sent 250 to bob.")
    async with in_process_master(
        openai_base_url=llm.base_url, openai_api_key="scripted", openagent_api_key=KEY
    ) as master:
        config = ClientConfig(master_ws=master.ws_url, api_key=KEY)
        async with OrchestratorActionAgent("bank", [TRANSFER, BALANCE], handler, config=config):
            async with asyncio.timeout(DEADLINE):
                while "bank" not in master.services.agents.known_ids(EVERY_TENANT):
                    await asyncio.sleep(0.01)
            process = await asyncio.create_subprocess_exec(
                "node",
                "run.mjs",
                master.base_url,
                KEY,
                cwd=CLIENT_DIR,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            try:
                async with asyncio.timeout(DEADLINE * 2):
                    out, err = await process.communicate()
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            assert process.returncode == 0, err.decode(errors="replace")
            # The client warns on stderr about an event it finds out of place ("TOOL_CALL_END: ..."): none.
            assert not re.findall(r"^[A-Z_]+: .*$", err.decode(errors="replace"), re.MULTILINE), err
            seen = json.loads(out.decode().strip().splitlines()[-1])
            [approval_id] = seen["pending"]
            async with httpx.AsyncClient(
                base_url=master.base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=DEADLINE
            ) as http:
                record = (await http.get(f"/approvals/{approval_id}")).json()

    balance, held, resumed = seen["balance"], seen["held"], seen["resumed"]
    assert balance["outcome"] == "success" and balance["text"] == "You have 3 EUR.", balance
    for kind in ("RUN_STARTED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"):
        assert kind in balance["types"], balance["types"]
    assert "TOOL_CALL_RESULT" in balance["types"] and "STATE_SNAPSHOT" in balance["types"]
    assert json.loads(balance["results"][0]["content"]) == {"eur": 3}

    assert held["outcome"] == "interrupt", held
    [interrupt] = held["interrupts"]
    assert (interrupt["reason"], interrupt["metadata"]["openagent"]["arguments"]) == ("tool_call", PAYMENT)

    assert resumed["outcome"] == "success" and resumed["errors"] == [], resumed
    assert [r["toolCallId"] for r in resumed["results"]] == [interrupt["toolCallId"]]
    assert resumed["text"] == "Sent 250 to bob."
    assert seen["pendingAfter"] == 0
    assert calls == [("balance", {}), ("transfer", PAYMENT)]  # the transfer ran once, approved
    assert record["status"] == "approved" and record["session_id"] == seen["threadId"]
    assert seen["state"]["openagent"]["sessionId"] == seen["threadId"]
    # The client's conversation: the held call and its result, as one thread.
    assert {"role": "tool", "toolCalls": [], "toolCallId": interrupt["toolCallId"]} in seen["messages"]
