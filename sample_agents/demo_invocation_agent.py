"""Invocation action agent ``demo-invocation-agent``: three small tools served over HTTP.

Run it next to a master (with Redis)::

    PYTHONPATH=. python sample_agents/demo_invocation_agent.py

It listens on ``INVOCATION_HOST``:``INVOCATION_PORT`` (default ``127.0.0.1:9000``), registers
once with ``POST {MASTER_BASE_URL}/register`` (retrying until the master answers) and then
serves tool calls until stopped; the master keeps the registration across its restarts.

Tools (each on its own endpoint):

- ``echo`` (``/run``): returns ``{"echo": text}``;
- ``get_time`` (``/get_time``): the current time in an IANA time zone (default ``UTC``);
- ``long_task`` (``/long_task``): sleeps ``steps`` times ``step_seconds``, reporting progress
  after each step.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from openagent import ProgressCallback, ToolError, ToolSchema
from openagent.invocation import InvocationActionAgent, run_invocation_agent

AGENT_ID = "demo-invocation-agent"
MAX_STEPS = 20
MAX_STEP_SECONDS = 5.0

TOOLS = [
    ToolSchema(
        name="echo",
        description="Echo a text back.",
        parameters={
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to echo"}},
            "required": ["text"],
        },
        endpoint="/run",
    ),
    ToolSchema(
        name="get_time",
        description="Current date and time in a time zone.",
        parameters={
            "type": "object",
            "properties": {
                "timezone": {
                    "type": "string",
                    "description": "IANA time zone, e.g. Europe/Paris (default UTC)",
                }
            },
        },
        endpoint="/get_time",
    ),
    ToolSchema(
        name="long_task",
        description="A slow task that reports its progress after each step (for trying progress updates).",
        parameters={
            "type": "object",
            "properties": {
                "steps": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_STEPS,
                    "description": "Number of steps (default 5)",
                },
                "step_seconds": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": MAX_STEP_SECONDS,
                    "description": "Seconds per step (default 0.5)",
                },
            },
        },
        endpoint="/long_task",
    ),
]


def echo(arguments: dict[str, Any]) -> dict[str, Any]:
    """``{"echo": text}``; ``text`` must be a string."""
    text = arguments.get("text")
    if not isinstance(text, str):
        raise ToolError(f"argument 'text' must be a string, got {text!r}")
    return {"echo": text}


def get_time(arguments: dict[str, Any]) -> dict[str, Any]:
    """The current time in ``arguments["timezone"]`` (default UTC); unknown zones are a ToolError."""
    name = arguments.get("timezone") or "UTC"
    if not isinstance(name, str):
        raise ToolError(f"argument 'timezone' must be a string, got {name!r}")
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):  # ValueError: not even a valid key, e.g. "../x"
        raise ToolError(f"unknown timezone {name!r}; use an IANA name such as 'Europe/Paris'") from None
    now = datetime.now(zone)
    return {"timezone": name, "iso": now.isoformat(), "utc_offset": now.strftime("%z")}


async def long_task(arguments: dict[str, Any], progress: ProgressCallback | None) -> dict[str, Any]:
    """Sleep ``steps`` x ``step_seconds``, reporting progress after each step."""
    steps = arguments.get("steps", 5)
    step_seconds = arguments.get("step_seconds", 0.5)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise ToolError(f"argument 'steps' must be an integer from 1 to {MAX_STEPS}, got {steps!r}")
    if isinstance(step_seconds, bool) or not isinstance(step_seconds, int | float):
        raise ToolError(f"argument 'step_seconds' must be a number, got {step_seconds!r}")
    if not 0 <= step_seconds <= MAX_STEP_SECONDS:
        raise ToolError(
            f"argument 'step_seconds' must be from 0 to {MAX_STEP_SECONDS:g}, got {step_seconds!r}"
        )
    for step in range(1, steps + 1):
        await asyncio.sleep(step_seconds)
        if progress is not None:
            await progress(f"step {step}/{steps} done", step / steps)
    return {"steps": steps, "status": "done"}


async def handle_tool(
    tool_name: str, arguments: dict[str, Any], *, progress: ProgressCallback | None = None
) -> dict[str, Any]:
    """The agent's tool handler (invocation style: the progress callback is named ``progress``)."""
    if tool_name == "echo":
        return echo(arguments)
    if tool_name == "get_time":
        return get_time(arguments)
    if tool_name == "long_task":
        return await long_task(arguments, progress)
    raise ToolError(f"unknown tool {tool_name!r} on agent {AGENT_ID!r}")


def build_agent(**options: Any) -> InvocationActionAgent:
    """The ``demo-invocation-agent``; ``options`` go to :class:`InvocationActionAgent` (host, port, ...)."""
    return InvocationActionAgent(AGENT_ID, TOOLS, tool_handler=handle_tool, **options)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_invocation_agent(build_agent())
