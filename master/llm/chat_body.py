"""The body of a chat completion request, as JSON bytes built in pieces.

Bodies are encoded by orjson (:func:`encode`) so that parts which do not change between rounds
can be reused: a session's replayed history is made of :class:`SharedMessage` objects, each
encoded once, and a run's messages (:class:`Messages`) share a :class:`SharedRun` that keeps the
encoded pieces of its first messages. :func:`chat_pieces` returns the body in pieces, joined once
per request (:class:`~master.llm.chat_endpoint.ChatEndpoint`), so that a long session's kept
history is neither re-encoded nor walked; :func:`chat_body` joins them. Each message is written
for its server and model (:class:`Wire`, :func:`master.llm.compat.wire_message`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from master.llm.compat import Compat, wire_message

__all__ = [
    "RUN_PIECES",
    "Messages",
    "SharedMessage",
    "SharedRun",
    "Wire",
    "chat_body",
    "chat_pieces",
    "encode",
    "encoded",
    "shared_part",
]


class SharedMessage(dict[str, Any]):
    """A chat message shared by several requests and never changed (a session's replayed history).

    The client keeps its encoded JSON in ``encoded``, and the token counter its count in
    ``tokens`` (:func:`master.llm.tokens.count_messages`), so that it is encoded and counted once.
    """

    __slots__ = ("encoded", "encoded_for", "tokens")

    def __init__(self, **fields: Any) -> None:
        super().__init__(fields)
        self.encoded: bytes | None = None
        self.encoded_for: Wire | None = None
        self.tokens: int | None = None


RUN_PIECES = 64
"""Pieces a :class:`SharedRun`'s kept JSON may be in before they are joined into one. The
session's next query adds its new messages as one more piece instead of copying a long history
each time; a join every few queries keeps the pieces few."""


class SharedRun:
    """A session's replayed history as one list of :class:`SharedMessage` objects, which is only
    ever appended to (as the session grows), shared by the requests of its queries.

    It keeps what the requests derive from a prefix of it: the JSON of ``items[:n]`` in a few
    pieces (:func:`chat_pieces`) and the running token counts (``token_sums[i]``: the tokens of
    ``items[:i]``, :func:`master.llm.tokens.count_messages`). A request carries the prefix as a
    :class:`Messages` list, so finding them takes no walk over a long history: its next query, or
    round, encodes and counts only the messages it has not seen.
    """

    __slots__ = ("_encoded", "items", "token_sums")

    def __init__(self) -> None:
        self.items: list[SharedMessage] = []
        self.token_sums: list[int] = [0]
        self._encoded: tuple[Wire | None, int, list[bytes]] = (None, 0, [])

    def encoded(self, count: int, wire: Wire | None = None) -> list[bytes]:
        """The JSON of ``items[:count]`` as ``wire`` sends it, comma-separated, in at most
        :data:`RUN_PIECES` pieces (to be joined with commas)."""
        kept_for, done, pieces = self._encoded
        if kept_for != wire:  # another server or model: start again
            done, pieces = 0, []
        if count == done:
            return pieces
        if count < done:  # an older request (a concurrent query of the session): not kept
            return [b",".join(encoded(m, wire) for m in self.items[:count])] if count else []
        pieces = [*pieces, b",".join(encoded(m, wire) for m in self.items[done:count])]
        if len(pieces) > RUN_PIECES:
            pieces = [b",".join(pieces)]
        self._encoded = (wire, count, pieces)
        return pieces


class Messages(list[Any]):
    """A request's chat messages, of which ``self[at:at + size]`` are ``run.items[:size]`` (a
    session's replayed history, :class:`SharedRun`). Whoever holds it may append messages, never
    change or remove the ones it has."""

    __slots__ = ("at", "run", "size")

    def __init__(self, messages: Iterable[Any] = ()) -> None:
        super().__init__(messages)
        self.run: SharedRun | None = None
        self.at = 0
        self.size = 0

    def share(self, run: SharedRun) -> None:
        """Append ``run``'s messages, as the shared part of these messages."""
        self.run, self.at, self.size = run, len(self), len(run.items)
        self.extend(run.items)


def shared_part(messages: Sequence[Any]) -> tuple[SharedRun, int, int] | None:
    """``(run, at, count)`` when ``messages[at:at + count]`` are ``run.items[:count]`` (a
    :class:`Messages` list whose shared part is still in place), else ``None``."""
    if not isinstance(messages, Messages) or messages.run is None or not messages.size:
        return None
    run, at, count = messages.run, messages.at, messages.size
    end = at + count
    if (
        end > len(messages)
        or messages[at] is not run.items[0]
        or messages[end - 1] is not run.items[count - 1]
    ):
        return None
    return run, at, count


@dataclass(frozen=True, slots=True)
class Wire:
    """How messages are written for one server and model (:func:`master.llm.compat.wire_message`)."""

    compat: Compat
    model: str

    def message(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        return wire_message(message, self.compat, self.model)


def encoded(message: Mapping[str, Any], wire: Wire | None = None) -> bytes:
    """A message's JSON as ``wire`` writes it (kept on a :class:`SharedMessage`)."""
    if isinstance(message, SharedMessage):
        if message.encoded is None or message.encoded_for != wire:
            message.encoded = encode(message if wire is None else wire.message(message))
            message.encoded_for = wire
        return message.encoded
    return encode(message if wire is None else wire.message(message))


def encode(value: Any) -> bytes:
    """JSON bytes as the ``openai`` client sends them (compact, UTF-8), by orjson: a body with 10
    tools takes about 20 us against 170 us with :func:`json.dumps` (``bench/README.md``). Keys
    that are not strings become strings, as with :func:`json.dumps`; NaN and infinities become
    ``null`` (the standard library would write ``NaN``, which JSON does not have)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def chat_body(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    stream: bool = False,
    options: Mapping[str, Any] | None = None,
    compat: Compat | None = None,
) -> bytes:
    """The request body of one completion, as one bytes object (:func:`chat_pieces`)."""
    return b"".join(chat_pieces(model, messages, tools, stream=stream, options=options, compat=compat))


def chat_pieces(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    stream: bool = False,
    options: Mapping[str, Any] | None = None,
    compat: Compat | None = None,
) -> list[bytes]:
    """The request body of one completion, in pieces to be joined in this order; ``options``
    (sampling parameters) are added as they are, but ``parallel_tool_calls`` and ``tool_choice``
    only when tools are offered (providers refuse them alone).

    With ``compat`` (the server's dialect, :mod:`master.llm.compat`) messages are written as that
    server takes them, and usage is asked for in streams only where the server takes it; without,
    the messages go as they are (the OpenAI API's dialect).

    A session's replayed history (the shared part of a :class:`Messages` list) comes as the JSON
    its :class:`SharedRun` keeps, so a long session is not re-encoded nor walked message by
    message on every round of every query; :class:`ChatEndpoint` joins the pieces once per request.
    """
    head: dict[str, Any] = {"model": model}
    if tools:
        head["tools"] = tools
    if options:
        head.update(
            (name, value)
            for name, value in options.items()
            if tools or name not in ("parallel_tool_calls", "tool_choice")
        )
    if stream:
        head["stream"] = True
        if compat is None or compat.stream_usage:
            head["stream_options"] = {"include_usage": True}
    wire = None if compat is None else Wire(compat, model)
    part = shared_part(messages)
    if part is None:
        parts = [encoded(message, wire) for message in messages]
    else:
        run, at, count = part
        parts = [
            *(encoded(message, wire) for message in messages[:at]),
            *run.encoded(count, wire),
            *(encoded(message, wire) for message in messages[at + count :]),
        ]
    pieces = [encode(head)[:-1] + b',"messages":[']
    for piece in parts:
        pieces += (piece, b",")
    if parts:
        pieces.pop()
    pieces.append(b"]}")
    return pieces
