"""Tool handlers, the same for both kinds of action agent: validating the tools, calling a
``tool_handler`` and turning what it returns or raises into a ``tool_result``.

Shared by :class:`~openagent.action.OrchestratorActionAgent` (WebSocket) and
:class:`~openagent.invocation.InvocationActionAgent` (HTTP), so a handler behaves alike
under both: see :class:`~openagent.action.OrchestratorActionAgent` for how it is called, and
:mod:`openagent.action` for how failures are reported.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import pydantic_core
from pydantic import ValidationError

from openagent._tracing import tool_span
from openagent.errors import ConfigurationError, ToolError
from protocol import ToolResult, ToolSchema

__all__ = [
    "ProgressCallback",
    "ToolFunction",
    "ToolHandler",
    "check_progress",
    "run_tool_call",
    "validate_tools",
]


class ProgressCallback(Protocol):
    """``await progress_callback(message, progress=None)``: report how a tool call is going.

    Sends a ``tool_progress`` frame (WebSocket agents) or POSTs the master's ``progress_url``
    (invocation agents); ``progress`` is the fraction done, 0..1, when known. Best effort:
    while the master cannot be reached the update is dropped (and logged).
    """

    async def __call__(self, message: str, progress: float | None = None) -> None: ...


ToolHandler = Callable[..., Any]
"""``handler(tool_name, arguments, **progress)``, async or not; see
:class:`~openagent.action.OrchestratorActionAgent`."""


def validate_tools(agent_id: str, tools: Sequence[ToolSchema | Mapping[str, Any]]) -> list[ToolSchema]:
    """The tools as :class:`~protocol.ToolSchema`; a ``ConfigurationError`` names an invalid or
    duplicate one."""
    schemas: list[ToolSchema] = []
    for index, tool in enumerate(tools):
        if isinstance(tool, ToolSchema):
            schemas.append(tool)
            continue
        name = tool.get("name") if isinstance(tool, Mapping) else None
        try:
            schemas.append(ToolSchema.model_validate(tool))
        except ValidationError as exc:
            label = repr(name) if name is not None else f"#{index}"
            raise ConfigurationError(f"invalid tool {label} of agent {agent_id!r}: {exc}") from None
    seen: set[str] = set()
    for schema in schemas:
        if schema.name in seen:
            raise ConfigurationError(f"duplicate tool name {schema.name!r} on agent {agent_id!r}")
        seen.add(schema.name)
    return schemas


def check_progress(progress: float | None) -> None:
    """Raise ``ValueError`` unless ``progress`` is ``None`` or within 0..1."""
    if progress is not None and not 0.0 <= progress <= 1.0:
        raise ValueError(f"progress must be between 0 and 1, got {progress!r}")


class ToolFunction:
    """A ``tool_handler`` function, inspected once, called the way its signature asks.

    Args:
        agent_id: Named in the ``ConfigurationError`` of a handler that does not fit.
        handler: ``handler(tool_name, arguments, ...)``, async or not.

    An async handler gets the async progress callback under the names it declares; a plain
    function runs in a worker thread (:func:`asyncio.to_thread`) and gets a blocking one.
    """

    def __init__(self, agent_id: str, handler: ToolHandler) -> None:
        self.handler = handler
        self.progress_names = _progress_parameters(agent_id, handler)
        self.is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            type(handler).__call__  # an object with an async __call__
        )

    async def __call__(
        self, tool_name: str, arguments: dict[str, Any], progress_callback: ProgressCallback
    ) -> Any:
        """Call the handler and return its result (awaited, when it is awaitable)."""
        if self.is_async:
            kwargs: dict[str, Any] = dict.fromkeys(self.progress_names, progress_callback)
            result = self.handler(tool_name, arguments, **kwargs)
        else:
            loop = asyncio.get_running_loop()

            def blocking_progress(message: str, progress: float | None = None) -> None:
                asyncio.run_coroutine_threadsafe(progress_callback(message, progress), loop).result()

            kwargs = dict.fromkeys(self.progress_names, blocking_progress)
            result = await asyncio.to_thread(self.handler, tool_name, arguments, **kwargs)
        return (await result) if inspect.isawaitable(result) else result


async def run_tool_call(
    call_id: str,
    tool_name: str,
    run: Callable[[], Awaitable[Any]],
    log: logging.Logger,
    *,
    agent_id: str = "",
    traceparent: str | None = None,
) -> ToolResult:
    """Await ``run()`` and return the call's ``tool_result``.

    With the master's ``traceparent``, ``run()`` runs inside the agent's span of the call
    (:mod:`openagent._tracing`).

    A JSON-serialisable value is the result. A :class:`~openagent.errors.ToolError` fails the
    call with its message as is (logged at INFO), any other exception with
    ``"<ExceptionType>: <message>"`` (logged with its traceback), and a value that is not
    JSON-serialisable with a message naming its type; all are logged on ``log``.
    """

    def failure(error: str) -> ToolResult:
        return ToolResult(call_id=call_id, success=False, error=error)

    try:
        with tool_span(agent_id, tool_name, call_id, traceparent):
            value = await run()
    except ToolError as exc:
        log.info("tool %s (call %s) failed: %s", tool_name, call_id, exc)
        return failure(str(exc))
    except Exception as exc:
        log.exception("tool %s (call %s) raised", tool_name, call_id)
        return failure(f"{type(exc).__name__}: {exc}")
    try:
        pydantic_core.to_json(value)
    except pydantic_core.PydanticSerializationError as exc:
        log.error("tool %s (call %s) returned a non-JSON value: %s", tool_name, call_id, exc)
        return failure(
            f"tool {tool_name!r} returned a value that is not JSON-serialisable ({type(value).__name__}): {exc}"
        )
    return ToolResult(call_id=call_id, success=True, result=value)


def _progress_parameters(agent_id: str, handler: ToolHandler) -> tuple[str, ...]:
    """Keyword names under which ``handler`` takes the progress callback (see
    :class:`~openagent.action.OrchestratorActionAgent`)."""
    if not callable(handler):
        raise ConfigurationError(f"tool_handler of agent {agent_id!r} is not callable: {handler!r}")
    try:
        parameters = inspect.signature(handler).parameters
    except (TypeError, ValueError):  # some builtins have no signature: pass no progress
        return ()
    by_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    names = tuple(
        name
        for name in ("progress_callback", "progress")
        if name in parameters and parameters[name].kind in by_keyword
    )
    if not names and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        names = ("progress_callback", "progress")
    try:
        inspect.signature(handler).bind("tool", {}, **dict.fromkeys(names))
    except TypeError as exc:
        raise ConfigurationError(
            f"tool_handler of agent {agent_id!r} must accept (tool_name, arguments): {exc}"
        ) from None
    return names
