"""Collaboration sample, buyer side: ``buyer-agent`` negotiates the unit price of an order.

Run it next to a master, with the seller (``sample_agents/negotiation_seller.py``)::

    PYTHONPATH=. python sample_agents/negotiation_buyer.py

Then start a negotiation (the orchestrator does it when a query needs it)::

    curl -s -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \\
         -d '{"agents": ["buyer-agent", "seller-agent"], "task": "Agree on a price for 100 units",
              "context": {"quantity": 100}}' http://127.0.0.1:8000/internal/collaborations

The buyer is the initiator: it opens with ``OPENING_PRICE``, and on each counter-offer
concedes ``CONCESSION`` of the gap, never above ``MAX_PRICE``. It accepts a counter within
``TOLERANCE`` of its own offer, and ends the session with the deal as the summary (the
wire format is in ``negotiation_seller.py``).
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

AGENT_ID = "buyer-agent"
OPENING_PRICE = 60.0
"""First offer per unit."""
MAX_PRICE = 90.0
"""The buyer never pays more than this per unit."""
CONCESSION = 0.5
"""Share of the gap between the offer and the counter-offer given up each round."""
TOLERANCE = 1.0
"""A counter-offer this close to the offer is accepted."""
MAX_ROUNDS = 20
ROUND_TIMEOUT = 30.0
"""Seconds to wait for the seller's answer."""

GET_BUDGET = ToolSchema(
    name="get_budget",
    description="The buyer's budget for an order of a quantity of units.",
    parameters={
        "type": "object",
        "properties": {"quantity": {"type": "integer", "minimum": 1}},
        "required": ["quantity"],
    },
)


async def handle_tool(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    quantity = int(arguments["quantity"])
    return {"quantity": quantity, "max_unit_price": MAX_PRICE, "budget": round(quantity * MAX_PRICE, 2)}


def next_offer(offer: float, counter: float) -> float:
    """The next offer after ``counter``: concede part of the gap, never above the maximum."""
    return round(min(MAX_PRICE, offer + CONCESSION * (counter - offer)), 2)


def deal(quantity: int, unit_price: float) -> str:
    return f"Agreed: {quantity} units at {unit_price:.2f} per unit ({quantity * unit_price:.2f} total)"


async def handle_collaboration(ctx: CollaborationContext) -> str:
    """Offer, read the counter-offer, concede, until the prices meet; the return value is the summary."""
    quantity = int(ctx.context.get("quantity", 100))
    seller = ctx.peer_ids[0]
    offer = OPENING_PRICE
    await ctx.send_message(seller, {"action": "offer", "quantity": quantity, "unit_price": offer})
    for _ in range(MAX_ROUNDS):
        reply = await ctx.receive_message(timeout=ROUND_TIMEOUT)
        if reply is None:
            return (
                f"No agreement: the seller did not answer within {ROUND_TIMEOUT:g} s (last offer {offer:.2f})"
            )
        if isinstance(reply, CollaborationEnd):
            return f"No agreement: {reply.summary}"
        price = float(reply.content["unit_price"])
        if reply.content.get("action") == "accept":
            return deal(quantity, price)
        if price <= MAX_PRICE and price - offer <= TOLERANCE:
            await ctx.send_message(seller, {"action": "accept", "unit_price": price})
            return deal(quantity, price)
        better = next_offer(offer, price)
        if better == offer:  # at our maximum and the seller does not come down: give up
            return f"No agreement: the seller wants {price:.2f}, the buyer pays at most {MAX_PRICE:.2f}"
        offer = better
        await ctx.send_message(seller, {"action": "offer", "quantity": quantity, "unit_price": offer})
    return f"No agreement after {MAX_ROUNDS} rounds (last offer {offer:.2f})"


def make_agent(config: ClientConfig | None = None) -> OrchestratorActionAgent:
    return OrchestratorActionAgent(
        AGENT_ID,
        [GET_BUDGET],
        handle_tool,
        collaboration_handler=handle_collaboration,
        metadata={"description": "Buys units; negotiates the unit price"},
        config=config,
    )


if __name__ == "__main__":
    run_action_agent(make_agent())
