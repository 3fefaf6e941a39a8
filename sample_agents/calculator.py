"""In-memory action agent ``calculator-agent``: arithmetic on two numbers, no internet needed.

Run it next to a master (``scripts/run.sh`` does)::

    PYTHONPATH=. python sample_agents/calculator.py      # or: openagent run sample_agents/calculator.py

It connects to ``MASTER_WS`` (default ``ws://127.0.0.1:8000/ws``), registers the tools
``add``, ``subtract``, ``multiply``, ``divide`` and ``power`` (each takes numbers ``a`` and
``b``) and answers ``tool_call`` frames until stopped. Every result is
``{"expression": "12 × 7", "result": 84}``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from openagent import ClientConfig, OrchestratorActionAgent, ToolError, ToolSchema, run_action_agent

AGENT_ID = "calculator-agent"


def _two_numbers(first: str, second: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "a": {"type": "number", "description": first},
            "b": {"type": "number", "description": second},
        },
        "required": ["a", "b"],
    }


TOOLS = [
    ToolSchema(
        name="add",
        description="Add two numbers: a plus b, their sum.",
        parameters=_two_numbers("The first number", "The number added to it"),
    ),
    ToolSchema(
        name="subtract",
        description="Subtract b from a: a minus b, their difference.",
        parameters=_two_numbers("The number to subtract from", "The number subtracted"),
    ),
    ToolSchema(
        name="multiply",
        description="Multiply two numbers: a times b, their product.",
        parameters=_two_numbers("The first factor", "The second factor"),
    ),
    ToolSchema(
        name="divide",
        description="Divide a by b: a divided by b, their quotient.",
        parameters=_two_numbers("The dividend", "The divisor (not 0)"),
    ),
    ToolSchema(
        name="power",
        description="Raise a to the power of b (exponent): a to the b.",
        parameters=_two_numbers("The base", "The exponent"),
    ),
]

_OPERATIONS: dict[str, tuple[str, Callable[[float, float], float]]] = {
    "add": ("+", operator.add),
    "subtract": ("-", operator.sub),
    "multiply": ("×", operator.mul),
    "divide": ("÷", operator.truediv),
    "power": ("^", operator.pow),
}


def _number(arguments: dict[str, Any], name: str) -> float:
    value = arguments.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError(f"argument {name!r} must be a number, got {value!r}")
    return float(value)  # floats bound the work: 10 ** 10**9 overflows instead of computing


def _shown(value: float) -> int | float:
    """``84.0`` as ``84``; other values unchanged."""
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def calculate(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Apply tool ``tool_name`` to ``a`` and ``b``; raise :class:`openagent.ToolError` on bad input."""
    if tool_name not in _OPERATIONS:
        raise ToolError(f"unknown tool {tool_name!r}; {AGENT_ID} offers {', '.join(_OPERATIONS)}")
    a, b = _number(arguments, "a"), _number(arguments, "b")
    symbol, apply = _OPERATIONS[tool_name]
    if tool_name == "divide" and b == 0:
        raise ToolError("cannot divide by zero: 'b' must not be 0")
    try:
        result = apply(a, b)
    except (OverflowError, ZeroDivisionError) as exc:
        raise ToolError(f"{_shown(a)} {symbol} {_shown(b)} has no finite result ({exc})") from exc
    if isinstance(result, complex) or not math.isfinite(result):
        raise ToolError(f"{_shown(a)} {symbol} {_shown(b)} has no finite real result")
    return {"expression": f"{_shown(a)} {symbol} {_shown(b)}", "result": _shown(result)}


async def handle_tool(tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The agent's tool handler."""
    return calculate(tool_name, arguments)


def build_agent(config: ClientConfig | None = None) -> OrchestratorActionAgent:
    """The ``calculator-agent`` with its five tools (``config``: from the environment when omitted)."""
    return OrchestratorActionAgent(AGENT_ID, TOOLS, handle_tool, config=config)


if __name__ == "__main__":
    run_action_agent(build_agent())
