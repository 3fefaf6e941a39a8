"""sample_agents/negotiation_buyer.py and negotiation_seller.py: the pricing logic, and both
scripts run as processes negotiating through a real master."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from sample_agents import negotiation_buyer as buyer
from sample_agents import negotiation_seller as seller
from tests.factories import ROOT, MasterProcess, agent_rows


def test_concessions_stay_within_each_side_limits() -> None:
    assert seller.counter_offer(100.0, 60.0) == 80.0
    assert seller.counter_offer(80.0, 70.0) == seller.FLOOR_PRICE  # never below the floor
    assert buyer.next_offer(60.0, 80.0) == 70.0
    assert buyer.next_offer(89.0, 100.0) == buyer.MAX_PRICE  # never above the maximum
    assert buyer.deal(100, 75.0) == "Agreed: 100 units at 75.00 per unit (7500.00 total)"


async def test_tools_answer_quotes_and_budgets() -> None:
    assert await seller.handle_tool("get_quote", {"quantity": 100}) == {
        "quantity": 100,
        "unit_price": 100.0,
        "total": 10000.0,
    }
    assert (await buyer.handle_tool("get_budget", {"quantity": 10}))["budget"] == 900.0
    assert buyer.make_agent().tools == [buyer.GET_BUDGET]
    assert seller.make_agent().tools == [seller.GET_QUOTE]


@pytest.fixture
def negotiators(master: MasterProcess) -> Iterator[list[subprocess.Popen[bytes]]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MASTER_WS": master.ws_url}
    processes = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "sample_agents" / script)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for script in ("negotiation_buyer.py", "negotiation_seller.py")
    ]
    yield processes
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


async def test_the_scripts_negotiate_through_the_master(
    master: MasterProcess, negotiators: list[subprocess.Popen[bytes]]
) -> None:
    async with asyncio.timeout(90):
        while not {"buyer-agent", "seller-agent"} <= {
            r["agent_id"] for r in await agent_rows(master.base_url)
        }:
            await asyncio.sleep(0.05)
    rows = {r["agent_id"]: r for r in await agent_rows(master.base_url)}
    assert rows["buyer-agent"]["metadata"]["supports_collaboration"] is True
    async with httpx.AsyncClient(base_url=master.base_url, timeout=15) as http:
        response = await http.post(
            "/internal/collaborations",
            json={
                "agents": ["buyer-agent", "seller-agent"],
                "task": "Price for 40 units",
                "context": {"quantity": 40},
            },
        )
    outcome = response.json()
    assert outcome["summary"] == "Agreed: 40 units at 75.00 per unit (3000.00 total)", outcome
    assert outcome["reason"] == "completed" and outcome["ended_by"] == "buyer-agent"
