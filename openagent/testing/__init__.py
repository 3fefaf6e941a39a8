"""Test helpers that ship with the SDK, so agents can be tested offline.

:class:`ScriptedOpenAIServer` is an OpenAI-compatible HTTP server on loopback that
plays back scripted replies, built on the standard library only::

    from openagent.testing import ScriptedOpenAIServer

    with ScriptedOpenAIServer() as llm:
        llm.add_tool_call("weather-agent__get_weather", {"city": "Paris"})
        llm.add_text("Sunny in Paris")
        # run the code under test with OPENAI_BASE_URL=llm.base_url
        assert len(llm.requests) == 2

Its requests are checked as the real API checks them where agent code can go wrong:
a function name outside ``^[a-zA-Z0-9_-]{1,64}$`` gets HTTP 400 with OpenAI's error body.

:func:`demo_handler` makes it the *demo LLM*, which is a demo and not a model: it calls the
offered tool whose name, description and parameters share words with the question, fills the
arguments it finds (numbers, quoted strings, enum values, a capitalised place name for a
``city``), and answers from the tool's result in one sentence::

    with ScriptedOpenAIServer() as llm:
        llm.set_handler(demo_handler)

It is served as the model :data:`DEMO_MODEL` (``openagent-demo``), so that a master using it says
so; asked by the master's agent builder, it fills in the builder's template with handlers that
return their arguments.

``python -m openagent.testing --port 8089`` runs one in the foreground that echoes the
last user message; with ``--demo`` it is the demo LLM, for trying the master without an LLM
(``scripts/run.sh`` starts it when no LLM is configured).
"""

from ._demo import DEMO_LABEL, DEMO_MODEL, demo_handler
from ._quirks import Quirks
from ._replies import (
    EmptyReply,
    ErrorReply,
    Handler,
    Reply,
    TextReply,
    ToolCall,
    ToolCallReply,
    echo_handler,
)
from ._server import DEFAULT_MODELS, ScriptedOpenAIServer
from ._wire import DEFAULT_DIMENSIONS

__all__ = [
    "DEFAULT_DIMENSIONS",
    "DEFAULT_MODELS",
    "DEMO_LABEL",
    "DEMO_MODEL",
    "EmptyReply",
    "ErrorReply",
    "Handler",
    "Quirks",
    "Reply",
    "ScriptedOpenAIServer",
    "TextReply",
    "ToolCall",
    "ToolCallReply",
    "demo_handler",
    "echo_handler",
]
