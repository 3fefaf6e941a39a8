"""Collaboration sample, seller side: ``seller-agent`` negotiates the unit price of an order.

Run it next to a master, with the buyer (``sample_agents/negotiation_buyer.py``)::

    PYTHONPATH=. python sample_agents/negotiation_seller.py

It exposes the tool ``get_quote`` and takes part in collaborations as a responder. The
wire format of the negotiation (the ``content`` of each ``peer_message``):

- buyer → seller ``{"action": "offer", "quantity": 100, "unit_price": 60.0}``
- seller → buyer ``{"action": "counter", "unit_price": 80.0}`` or ``{"action": "accept", "unit_price": 78.5}``
- buyer → seller ``{"action": "accept", "unit_price": 80.0}``, then the buyer ends the session.

The seller starts at its list price and, on each offer, concedes ``CONCESSION`` of the gap,
never going below its floor; it accepts an offer within ``TOLERANCE`` of its last ask.
"""

from __future__ import annotations

from typing import Any

from openagent import (
    ClientConfig,
    CollaborationContext,
    OrchestratorActionAgent,
    ToolSchema,
    run_action_agent,
)
from protocol import CollaborationEnd

AGENT_ID = "seller-agent"
LIST_PRICE = 100.0
"""Opening ask per unit."""
FLOOR_PRICE = 75.0
"""The seller never sells below this per unit."""
CONCESSION = 0.5
"""Share of the gap between the ask and the offer given up in each counter-offer."""
TOLERANCE = 1.0
"""An offer this close to the ask is accepted."""
ROUND_TIMEOUT = 30.0
"""Seconds to wait for the buyer's next message."""

GET_QUOTE = ToolSchema(
    name="get_quote",
    description="List price of an order of a quantity of units (before any negotiation).",
    parameters={
        "type": "object",
        "properties": {"quantity": {"type": "integer", "minimum": 1}},
        "required": ["quantity"],
    },
)


async def handle_tool(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    quantity = int(arguments["quantity"])
    return {"quantity": quantity, "unit_price": LIST_PRICE, "total": round(quantity * LIST_PRICE, 2)}


def counter_offer(ask: float, offer: float) -> float:
    """The next ask after ``offer``: concede part of the gap, never below the floor."""
    return round(max(FLOOR_PRICE, ask - CONCESSION * (ask - offer)), 2)


async def handle_collaboration(ctx: CollaborationContext) -> str:
    """Answer each offer with a counter-offer until one is acceptable."""
    ask = LIST_PRICE
    while True:
        message = await ctx.receive_message(timeout=ROUND_TIMEOUT)
        if message is None:
            return f"no offer within {ROUND_TIMEOUT:g} s; last ask {ask:.2f}"
        if isinstance(message, CollaborationEnd):
            return f"ended: {message.summary}"
        content = message.content
        buyer = message.from_agent or ctx.peer_ids[0]
        if content.get("action") == "accept":
            return f"sold at {float(content['unit_price']):.2f} per unit"
        if content.get("action") != "offer":
            continue
        offer = float(content["unit_price"])
        if offer >= FLOOR_PRICE and ask - offer <= TOLERANCE:
            await ctx.send_message(buyer, {"action": "accept", "unit_price": offer})
            return f"accepted {offer:.2f} per unit"
        ask = counter_offer(ask, offer)
        await ctx.send_message(buyer, {"action": "counter", "unit_price": ask})


def make_agent(config: ClientConfig | None = None) -> OrchestratorActionAgent:
    return OrchestratorActionAgent(
        AGENT_ID,
        [GET_QUOTE],
        handle_tool,
        collaboration_handler=handle_collaboration,
        metadata={"description": "Sells units; negotiates the unit price"},
        config=config,
    )


if __name__ == "__main__":
    run_action_agent(make_agent())
