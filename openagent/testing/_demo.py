"""The demo LLM: a handler that calls tools by matching words, so the master can be tried offline.

It is a demo, not a model: it understands nothing. For each chat request it

1. answers from the tool results when the conversation ends with ``tool`` messages
   (one readable sentence per result, failures included);
2. otherwise scores every offered tool by how many words of the last user message
   appear in the tool's name, description and parameters, and calls the best one whose
   required parameters it can fill from the message: numbers for ``number``/``integer``
   parameters (in order), a value of an ``enum``, a quoted string for a ``string``
   parameter, and a capitalised place name (``Paris``, ``New York``) for a parameter
   named ``city``, ``location``, ``place`` or ``town``;
3. when the master's prompt lists attached files ("Files attached in this conversation") and a
   tool takes a required ``query`` string (the RAG indexer's ``search_knowledge``), calls it with
   the user's message, so that a question about an attached file is answered from it;
4. answers directly, saying it is a demo and which tools were on offer, when no tool matches.

Asked by the master's agent builder, it fills in the builder's own template instead
(:mod:`openagent.testing._demo_builder`): the tools the form lists, handlers that return their
arguments. It serves the model id :data:`DEMO_MODEL`, shown as :data:`DEMO_LABEL`.

Use it with :meth:`~openagent.testing.ScriptedOpenAIServer.set_handler`, or run
``python -m openagent.testing --demo``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._demo_builder import builder_reply
from ._replies import Reply, TextReply, ToolCall, ToolCallReply, text_of

__all__ = ["DEMO_LABEL", "DEMO_MODEL", "demo_handler"]

DEMO_MODEL = "openagent-demo"
"""The model id the demo LLM serves (``GET /v1/models``) and the master shows while it runs."""
DEMO_LABEL = "demo LLM, not a model"
"""How a user interface names :data:`DEMO_MODEL`."""

_STOPWORDS = frozenset(
    """a an and are as at be by can could do does for from get give how i in is it me my of on or
    please show tell the this to what whats which who will with would you your""".split()
)
_PLACE_PARAMETERS = frozenset({"city", "location", "place", "town"})
_PLACE_PREPOSITIONS = frozenset({"in", "at", "for", "near", "of", "from", "to"})
_NAME_WEIGHT, _PARAMETER_WEIGHT, _DESCRIPTION_WEIGHT = 3, 2, 1
_MIN_SHARED_PREFIX = 6
"""Words sharing this many first letters match (``multiply`` and ``multiplied``)."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")
_AGENT_PREFIX = re.compile(r"^\[agent [^\]]*\]\s*")
"""The ``[agent <id>]`` the master puts before each tool description."""
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?<!\w)'([^']+)'(?!\w)")


@dataclass(frozen=True, slots=True)
class _Tool:
    name: str
    description: str
    parameters: Mapping[str, Any]

    @property
    def properties(self) -> Mapping[str, Any]:
        properties = self.parameters.get("properties")
        return properties if isinstance(properties, Mapping) else {}

    @property
    def required(self) -> list[str]:
        required = self.parameters.get("required")
        return [name for name in required if isinstance(name, str)] if isinstance(required, list) else []


def demo_handler(body: dict[str, Any]) -> Reply:
    """Answer one chat request as the demo LLM (see the module docstring)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if messages and messages[-1].get("role") == "tool":
        return TextReply(_answer_from_results(messages))
    module = builder_reply(messages)
    if module is not None:
        return TextReply(module)
    query = next((text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    tools = [] if body.get("tool_choice") == "none" else _offered_tools(body.get("tools"))
    if _mentions_attachments(messages):
        search = next((t for t in tools if _takes_query(t)), None)
        if search is not None and query:
            return ToolCallReply((ToolCall(search.name, {"query": query}),))
    missing: list[str] = []
    for tool in _ranked(tools, query):
        arguments = _arguments(tool, query)
        unfilled = [name for name in tool.required if name not in arguments]
        if not unfilled:
            return ToolCallReply((ToolCall(tool.name, arguments),))
        missing.append(f"{tool.name} needs {', '.join(repr(name) for name in unfilled)}")
    return TextReply(_direct_answer(query, tools, missing))


# -- choosing a tool -----------------------------------------------------------------------------

_ATTACHMENTS_NOTE = "Files attached in this conversation"
"""How the master's system prompt introduces attached files (master/attachments/rag.py)."""


def _mentions_attachments(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(m.get("role") == "system" and _ATTACHMENTS_NOTE in text_of(m.get("content")) for m in messages)


def _takes_query(tool: _Tool) -> bool:
    spec = tool.properties.get("query")
    return "query" in tool.required and isinstance(spec, dict) and "string" in _types(spec)


def _offered_tools(raw: Any) -> list[_Tool]:
    tools = []
    for entry in raw if isinstance(raw, list) else []:
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            tools.append(
                _Tool(
                    function["name"],
                    str(function.get("description") or ""),
                    parameters if isinstance(parameters, dict) else {},
                )
            )
    return tools


def _words(text: str) -> list[str]:
    """Lower-case words of ``text``, splitting ``snake_case``, ``kebab-case`` and ``camelCase``."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return [word.lower() for word in _WORD.findall(spaced) if not word.isdigit()]


def _content_words(text: str) -> set[str]:
    return {word for word in _words(text) if word not in _STOPWORDS and len(word) > 1}


def _same_word(a: str, b: str) -> bool:
    if a == b:
        return True
    shorter, longer = sorted((a, b), key=len)
    if len(shorter) >= 4 and longer.startswith(shorter):
        return True
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    return shared >= _MIN_SHARED_PREFIX


def _score(tool: _Tool, query_words: set[str]) -> int:
    parameter_text = " ".join(
        f"{name} {spec.get('description', '')} {' '.join(map(str, spec.get('enum', [])))}"
        for name, spec in tool.properties.items()
        if isinstance(spec, dict)
    )
    fields = (
        (_content_words(tool.name), _NAME_WEIGHT),
        (_content_words(parameter_text), _PARAMETER_WEIGHT),
        (_content_words(tool.description), _DESCRIPTION_WEIGHT),
    )
    score = 0
    for word in query_words:
        score += max(
            (weight for words, weight in fields if any(_same_word(word, w) for w in words)), default=0
        )
    return score


def _ranked(tools: Sequence[_Tool], query: str) -> list[_Tool]:
    """The tools sharing a word with ``query``, best first (ties keep the offered order)."""
    query_words = _content_words(query)
    scored = [(_score(tool, query_words), index, tool) for index, tool in enumerate(tools)]
    return [tool for score, _, tool in sorted(scored, key=lambda s: (-s[0], s[1])) if score > 0]


# -- filling arguments ---------------------------------------------------------------------------


def _types(spec: Mapping[str, Any]) -> set[str]:
    declared = spec.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def _arguments(tool: _Tool, query: str) -> dict[str, Any]:
    """The arguments of ``tool`` found in ``query``, each of the type its schema declares."""
    quoted = [next(group for group in match.groups() if group) for match in _QUOTED.finditer(query)]
    unquoted = _QUOTED.sub(" ", query)
    numbers = [float(match.group()) for match in _NUMBER.finditer(unquoted)]
    query_words = _words(unquoted)
    arguments: dict[str, Any] = {}
    for name, spec in tool.properties.items():
        if not isinstance(spec, dict):
            continue
        types = _types(spec)
        enum = spec.get("enum")
        if isinstance(enum, list):
            value = _enum_value(enum, query_words)
            if value is not None:
                arguments[name] = value
        elif types & {"number", "integer"} and numbers:
            number = numbers[0]
            if "number" in types:
                arguments[name] = int(number) if number.is_integer() else number
                numbers.pop(0)
            elif number.is_integer():
                arguments[name] = int(number)
                numbers.pop(0)
        elif "string" in types:
            if name.lower() in _PLACE_PARAMETERS:
                place = _place_name(unquoted)
                if place is not None:
                    arguments[name] = place
            elif quoted:
                arguments[name] = quoted.pop(0)
    return arguments


def _enum_value(enum: Iterable[Any], query_words: Sequence[str]) -> Any:
    for value in enum:
        if isinstance(value, str) and value.lower() in query_words:
            return value
    return None


def _place_name(text: str) -> str | None:
    """The capitalised place name in ``text``: the run of capitalised words after ``in``/``at``/
    ``for``…, else the last such run, ignoring capitalised stop words (``What``, ``The``)."""
    tokens = re.findall(r"[^\W\d_][\w'-]*|[^\w\s]", text)
    runs: list[tuple[int, list[str]]] = []
    current: list[str] = []
    for index, token in enumerate(tokens):
        if token[0].isupper() and token.lower() not in _STOPWORDS:
            if not current:
                runs.append((index, current))
            current.append(token)
        else:
            current = []
    if not runs:
        return None
    for start, run in runs:
        if start > 0 and tokens[start - 1].lower() in _PLACE_PREPOSITIONS:
            return " ".join(run)
    return " ".join(runs[-1][1])


# -- answering -----------------------------------------------------------------------------------


def _answer_from_results(messages: Sequence[Mapping[str, Any]]) -> str:
    """One sentence per ``tool`` message at the end of ``messages``."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names[str(call.get("id"))] = str(call["function"].get("name"))
    trailing: list[Mapping[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        trailing.insert(0, message)
    return " ".join(
        _result_sentence(names.get(str(m.get("tool_call_id")), "tool"), text_of(m.get("content")))
        for m in trailing
    )


def _tool_label(function_name: str) -> str:
    agent, sep, tool = function_name.partition("__")
    return f"The {tool} tool of {agent}" if sep and agent and tool else f"The {function_name} tool"


def _result_sentence(function_name: str, content: str) -> str:
    label = _tool_label(function_name)
    try:
        body: Any = json.loads(content)
    except ValueError:
        body = content
    if isinstance(body, dict) and set(body) == {"error"}:
        return f"{label} failed: {_readable(body['error'])}."
    if isinstance(body, dict) and set(body) == {"result"}:
        body = body["result"]
    return f"{label} answered: {_readable(body)}."


def _readable(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{str(key).replace('_', ' ')} {_readable(item)}" for key, item in value.items())
    if isinstance(value, list):
        return ", ".join(_readable(item) for item in value) or "nothing"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).rstrip(".")


def _direct_answer(query: str, tools: Sequence[_Tool], missing: Sequence[str]) -> str:
    head = "(demo LLM, not a real model)"
    if missing:
        return f"{head} A tool matches your words, but I found no value for its parameters: {'; '.join(missing)}."
    if not tools:
        return f"{head} No agent tools are on offer, so I can only repeat you: {query}"
    offered = "; ".join(
        f"{tool.name} ({_AGENT_PREFIX.sub('', tool.description)})" if tool.description else tool.name
        for tool in tools
    )
    return f"{head} None of the offered tools matches the words of your question. Offered: {offered}."
