"""The benchmark's LLM: decides instantly, so the figures measure the hub, not a model.

The first completion of a query asks for one call of the bench tool (``<agent>__echo``)
with the user's text; the completion that follows the tool message returns the final
answer. :func:`decide` drives a :class:`master.llm.model.FunctionChatModel`; :func:`scripted_reply`
drives the same decisions through :class:`openagent.testing.ScriptedOpenAIServer`, so the
master's real OpenAI client and its HTTP round trips are in the path.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from bench.echo_tool import TOOL_NAME
from master.llm.model import ChatMessage, ChatResult, ToolCallRequest
from openagent.testing import Reply, TextReply, ToolCall, ToolCallReply

_ids = itertools.count()


def _tool_function(tools: Sequence[dict[str, Any]] | None) -> str | None:
    """The OpenAI function name of the first bench tool offered."""
    for tool in tools or ():
        name = str(tool.get("function", {}).get("name", ""))
        if name.endswith(f"__{TOOL_NAME}"):
            return name
    return None


def _user_text(messages: Sequence[ChatMessage]) -> str:
    content = messages[-1].get("content") if messages else ""
    return content if isinstance(content, str) else ""


def decide(messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] | None) -> ChatResult:
    """First call: one tool call; after the tool message: the answer."""
    if messages and messages[-1].get("role") == "tool":
        return ChatResult(content=f"The tool said {messages[-1].get('content')}")
    name = _tool_function(tools)
    if name is None:
        return ChatResult(content="no bench tool is connected")
    arguments = json.dumps({"text": _user_text(messages)})
    return ChatResult(
        content=None, tool_calls=[ToolCallRequest(id=f"call_{next(_ids)}", name=name, arguments=arguments)]
    )


def scripted_reply(body: dict[str, Any]) -> Reply:
    """The same decisions for :meth:`ScriptedOpenAIServer.set_handler`."""
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        return TextReply(f"The tool said {messages[-1].get('content')}")
    name = _tool_function(body.get("tools"))
    if name is None:
        return TextReply("no bench tool is connected")
    return ToolCallReply((ToolCall(name, {"text": _user_text(messages)}),))
