"""Agent modules the scripted generator model writes in the builder tests."""

from __future__ import annotations

UNIT_CONVERTER = '''\
# module: unit_converter
"""Unit converter: converts lengths, masses and temperatures."""

from __future__ import annotations

from typing import Any

from openagent import ClientConfig, OrchestratorActionAgent, ToolError, ToolSchema, run_action_agent

AGENT_ID = "unit-converter"

FACTORS = {("km", "mi"): 0.621371, ("mi", "km"): 1.609344, ("kg", "lb"): 2.204623, ("lb", "kg"): 0.453592}

TOOLS = [
    ToolSchema(
        name="convert",
        description="Convert a value between units (km, mi, kg, lb, c, f).",
        parameters={
            "type": "object",
            "properties": {
                "value": {"type": "number", "description": "The value to convert"},
                "from_unit": {"type": "string", "description": "km, mi, kg, lb, c or f"},
                "to_unit": {"type": "string", "description": "km, mi, kg, lb, c or f"},
            },
            "required": ["value", "from_unit", "to_unit"],
        },
    ),
]


async def handle_tool(tool_name: str, arguments: dict[str, Any]) -> Any:
    if tool_name != "convert":
        raise ToolError(f"unknown tool {tool_name!r}")
    value = float(arguments["value"])
    pair = (str(arguments["from_unit"]).lower(), str(arguments["to_unit"]).lower())
    if pair == ("c", "f"):
        return {"value": round(value * 9 / 5 + 32, 3), "unit": "f"}
    if pair == ("f", "c"):
        return {"value": round((value - 32) * 5 / 9, 3), "unit": "c"}
    if pair not in FACTORS:
        raise ToolError(f"cannot convert {pair[0]!r} to {pair[1]!r}")
    return {"value": round(value * FACTORS[pair], 3), "unit": pair[1]}


def build_agent(config: ClientConfig | None = None) -> OrchestratorActionAgent:
    return OrchestratorActionAgent(
        AGENT_ID, TOOLS, handle_tool, metadata={"description": "Converts units"}, config=config
    )


if __name__ == "__main__":
    run_action_agent(build_agent())
'''

BAD = """\
# module: unit_converter
import subprocess

from openagent import OrchestratorActionAgent, ToolSchema

TOOLS = [ToolSchema(name="convert", parameters={"type": "string"})]


async def handle_tool(tool_name, arguments):
    return subprocess.run(["units", str(arguments)], capture_output=True).stdout.decode()


agent = OrchestratorActionAgent("unit-converter", TOOLS, handle_tool)
"""

PROSE = "Sure! A unit converter is a great idea. You could write a function that multiplies by a factor."

NEGOTIATOR = """\
# module: haggler
from __future__ import annotations

from typing import Any

from openagent import ClientConfig, CollaborationContext, OrchestratorActionAgent, ToolError, ToolSchema
from protocol import CollaborationEnd

AGENT_ID = "haggler"
TOOLS = [
    ToolSchema(
        name="quote",
        description="The list price",
        parameters={"type": "object", "properties": {}},
    )
]


async def handle_tool(tool_name: str, arguments: dict[str, Any]) -> Any:
    if tool_name != "quote":
        raise ToolError(f"unknown tool {tool_name!r}")
    return {"price": 100}


async def handle_collaboration(ctx: CollaborationContext) -> str:
    price = 100.0
    if ctx.role == "initiator":
        await ctx.send_message(ctx.peer_ids[0], {"action": "offer", "price": price})
    while True:
        message = await ctx.receive_message(timeout=30)
        if message is None or isinstance(message, CollaborationEnd):
            return "no deal"
        offer = float(message.content.get("price", 0))
        if offer >= 80:
            await ctx.send_message(message.from_agent, {"action": "accept", "price": offer})
            return f"sold at {offer}"
        price = max(80.0, (price + offer) / 2)
        await ctx.send_message(message.from_agent, {"action": "counter", "price": price})


def build_agent(config: ClientConfig | None = None) -> OrchestratorActionAgent:
    return OrchestratorActionAgent(
        AGENT_ID, TOOLS, handle_tool, collaboration_handler=handle_collaboration, config=config
    )
"""


def fenced(code: str) -> str:
    """How a chat model usually answers: a sentence, then a fenced block."""
    return f"Here is the module:\n\n```python\n{code}```\n"
