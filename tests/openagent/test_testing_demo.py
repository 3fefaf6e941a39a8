"""The demo LLM (``openagent.testing.demo_handler``): tool choice, arguments, answers, over the wire."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from openagent.testing import ScriptedOpenAIServer, TextReply, ToolCallReply, demo_handler
from openagent.testing.__main__ import main


def tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


NUMBER = {"type": "number"}
ADD = tool(
    "calculator-agent__add",
    "[agent calculator-agent] Add two numbers: a plus b.",
    {"a": NUMBER, "b": NUMBER},
    ["a", "b"],
)
MULTIPLY = tool(
    "calculator-agent__multiply",
    "[agent calculator-agent] Multiply: a times b.",
    {"a": NUMBER, "b": NUMBER},
    ["a", "b"],
)
WEATHER = tool(
    "weather-agent__get_weather",
    "[agent weather-agent] Current weather for a city.",
    {"city": {"type": "string", "description": "City name"}},
    ["city"],
)
TOOLS = [ADD, MULTIPLY, WEATHER]


def ask(query: str, tools: list[dict[str, Any]] | None = None, **extra: Any) -> TextReply | ToolCallReply:
    body = {"messages": [{"role": "system", "content": "Be helpful."}, {"role": "user", "content": query}]}
    reply = demo_handler({**body, "tools": TOOLS if tools is None else tools, **extra})
    assert isinstance(reply, TextReply | ToolCallReply)
    return reply


def called(reply: TextReply | ToolCallReply) -> tuple[str, dict[str, Any]]:
    assert isinstance(reply, ToolCallReply), reply
    (call,) = reply.calls
    assert isinstance(call.arguments, dict)
    return call.name, dict(call.arguments)


@pytest.mark.parametrize(
    ("query", "name", "arguments"),
    [
        ("What is 12 times 7?", "calculator-agent__multiply", {"a": 12, "b": 7}),
        ("add 2.5 and -3", "calculator-agent__add", {"a": 2.5, "b": -3}),
        ("How much is 3 plus 4?", "calculator-agent__add", {"a": 3, "b": 4}),
        ("Multiplied, 6 and 7 make?", "calculator-agent__multiply", {"a": 6, "b": 7}),
        ("What is the weather in Paris?", "weather-agent__get_weather", {"city": "Paris"}),
        ("Tell me the weather in New York today", "weather-agent__get_weather", {"city": "New York"}),
        ("Paris weather", "weather-agent__get_weather", {"city": "Paris"}),
    ],
)
def test_picks_the_tool_sharing_words_and_fills_its_arguments(
    query: str, name: str, arguments: dict[str, Any]
) -> None:
    assert called(ask(query)) == (name, arguments)


def test_parameter_names_and_descriptions_count_as_words() -> None:
    lookup = tool(
        "kb__lookup", "Look something up.", {"isbn": {"type": "string", "description": "Book ISBN"}}, []
    )
    other = tool("kb__other", "Something else.", {}, [])
    assert called(ask("find the book 'Dune'", [other, lookup])) == ("kb__lookup", {"isbn": "Dune"})


def test_respects_types_enums_and_quoted_strings() -> None:
    convert = tool(
        "units__convert",
        "Convert a value between units.",
        {
            "count": {"type": "integer"},
            "value": {"type": "number"},
            "unit": {"type": "string", "enum": ["km", "mi"]},
            "label": {"type": "string"},
            "flag": {"type": "boolean"},
        },
        ["value", "unit"],
    )
    # 2.5 is no integer, so it is left for the number parameter; the quoted "3 mi" is a string, not numbers.
    name, arguments = called(ask('convert 2.5 km, labelled "3 mi"', [convert]))
    assert (name, arguments) == ("units__convert", {"value": 2.5, "unit": "km", "label": "3 mi"})


def test_a_tool_whose_required_arguments_are_missing_is_not_called() -> None:
    reply = ask("weather please")
    assert isinstance(reply, TextReply)
    assert "demo LLM" in reply.text
    assert "weather-agent__get_weather needs 'city'" in reply.text


def test_falls_back_to_the_next_tool_that_can_be_called() -> None:
    search = tool(
        "web__search_weather", "Search the web for weather.", {"query": {"type": "string"}}, ["query"]
    )
    assert called(ask("weather in Paris", [search, WEATHER])) == (
        "weather-agent__get_weather",
        {"city": "Paris"},
    )


def test_a_question_about_attached_files_searches_them() -> None:
    search = tool(
        "document-indexer-agent__search_knowledge",
        "Search the indexed files.",
        {"query": {"type": "string"}, "top_k": {"type": "integer"}},
        ["query"],
    )
    body = {
        "messages": [
            {
                "role": "system",
                "content": "Files attached in this conversation (refs only): - a.txt (ref r1)",
            },
            {"role": "user", "content": "When does the harbour open?"},
        ],
        "tools": [WEATHER, search],
    }
    assert called(demo_handler(body)) == (
        "document-indexer-agent__search_knowledge",
        {"query": "When does the harbour open?"},
    )
    # Without attached files the same question matches no tool.
    assert isinstance(ask("When does the harbour open?", [WEATHER, search]), TextReply)


def test_answers_directly_naming_the_offered_tools_when_nothing_matches() -> None:
    reply = ask("Hello there!")
    assert isinstance(reply, TextReply)
    assert "not a real model" in reply.text
    assert "weather-agent__get_weather (Current weather for a city.)" in reply.text


def test_answers_directly_without_tools_or_when_told_not_to_call_them() -> None:
    assert isinstance(ask("What is 2 plus 2?", tools=[]), TextReply)
    assert isinstance(ask("What is 2 plus 2?", tool_choice="none"), TextReply)


def test_answers_from_the_tool_results_in_sentences() -> None:
    messages = [
        {"role": "user", "content": "What is 12 times 7, and the weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "calculator-agent__multiply", "arguments": "{}"},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "weather-agent__get_weather", "arguments": "{}"},
                },
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": json.dumps({"result": {"expression": "12 × 7", "result": 84.0}}),
        },
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": json.dumps({"error": "weather service unreachable."}),
        },
    ]
    reply = demo_handler({"messages": messages, "tools": TOOLS})
    assert reply == TextReply(
        "The multiply tool of calculator-agent answered: expression 12 × 7, result 84. "
        "The get_weather tool of weather-agent failed: weather service unreachable."
    )


@pytest.fixture
def demo_llm() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer() as server:
        server.set_handler(demo_handler)
        yield server


@pytest.mark.parametrize("stream", [False, True])
def test_serves_tool_calls_over_the_openai_wire(demo_llm: ScriptedOpenAIServer, stream: bool) -> None:
    with openai.OpenAI(base_url=demo_llm.base_url, api_key="demo", max_retries=0, timeout=10) as client:
        request = {
            "model": "demo",
            "messages": [{"role": "user", "content": "What is 12 times 7?"}],
            "tools": TOOLS,
        }
        if stream:
            chunks = list(client.chat.completions.create(**request, stream=True))
            arguments = "".join(
                call.function.arguments or ""
                for chunk in chunks
                if chunk.choices
                for call in chunk.choices[0].delta.tool_calls or []
                if call.function is not None
            )
            assert chunks[-1].choices[0].finish_reason == "tool_calls"
        else:
            message = client.chat.completions.create(**request).choices[0].message
            assert message.tool_calls is not None
            assert message.tool_calls[0].function.name == "calculator-agent__multiply"
            arguments = message.tool_calls[0].function.arguments
    assert json.loads(arguments) == {"a": 12, "b": 7}


def test_main_demo_flag_serves_the_demo_llm(capsys: pytest.CaptureFixture[str]) -> None:
    stop = threading.Event()
    runner = threading.Thread(target=main, args=(["--demo", "--port", "0"],), kwargs={"stop": stop})
    runner.start()
    try:
        deadline = time.monotonic() + 60
        output = ""
        while (found := re.search(r"http://127\.0\.0\.1:\d+/v1", output)) is None:
            assert time.monotonic() < deadline, f"no URL printed: {output!r}"
            time.sleep(0.02)
            output += capsys.readouterr().out
        assert "demo LLM" in output
        with openai.OpenAI(base_url=found.group(0), api_key="t", max_retries=0, timeout=10) as c:
            completion = c.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "weather in Paris"}], tools=TOOLS
            )
        calls = completion.choices[0].message.tool_calls
        assert calls is not None and calls[0].function.name == "weather-agent__get_weather"
    finally:
        stop.set()
        runner.join(10)
    assert not runner.is_alive()
