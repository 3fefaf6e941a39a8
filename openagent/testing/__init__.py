"""Test helpers that ship with the SDK, so agents can be tested offline.

:class:`ScriptedOpenAIServer` is an OpenAI-compatible HTTP server on loopback that
plays back scripted replies, built on the standard library only::

    from openagent.testing import ScriptedOpenAIServer

    with ScriptedOpenAIServer() as llm:
        llm.add_tool_call("weather-agent__get_weather", {"city": "Paris"})
        llm.add_text("Sunny in Paris")
        # run the code under test with OPENAI_BASE_URL=llm.base_url
        assert len(llm.requests) == 2

``python -m openagent.testing --port 8089`` runs one in the foreground that echoes the
last user message, for trying the master without an LLM.
"""

from ._replies import ErrorReply, Handler, Reply, TextReply, ToolCall, ToolCallReply, echo_handler
from ._server import DEFAULT_MODELS, ScriptedOpenAIServer
from ._wire import DEFAULT_DIMENSIONS

__all__ = [
    "DEFAULT_DIMENSIONS",
    "DEFAULT_MODELS",
    "ErrorReply",
    "Handler",
    "Reply",
    "ScriptedOpenAIServer",
    "TextReply",
    "ToolCall",
    "ToolCallReply",
    "echo_handler",
]
