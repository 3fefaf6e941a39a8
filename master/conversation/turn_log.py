"""A session's turns in memory: as this master parsed, cached and handed them to a query.

:class:`~master.conversation.store.SessionStore` keeps one :class:`TurnLog` per recent session
and extends it in place with the turns appended since (:func:`merge_log`), so a long session is
parsed once; each query gets a :class:`SessionTurns` over it, and what is derived from stored
turns (replayed messages, summary positions) is kept on them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson

Turn = dict[str, Any]


class StoredTurn(dict[str, Any]):
    """A turn as this master loaded it: shared by every later query of the session, never changed.

    ``replay`` keeps what :mod:`master.conversation.history` derived from it (the chat
    messages of the query it starts).
    """

    __slots__ = ("replay",)

    def __init__(self, turn: dict[str, Any]) -> None:
        super().__init__(turn)
        self.replay: object = None


class TurnLog(list[Turn]):
    """A session's turns as this master read them (``length``: bytes of their stored JSON).

    It is only ever appended to, as the session grows, and never changed otherwise, so what is
    derived from its first turns stays true: the positions of its summary turns (``marks``,
    :func:`master.conversation.context.split_turns`) and its replayed messages (``replay``,
    :mod:`master.conversation.history`) are kept on it, and a session's next query derives only
    what its new turns add.
    """

    __slots__ = ("length", "marks", "replay")

    def __init__(self, turns: Sequence[Turn], length: int) -> None:
        super().__init__(turns)
        self.length = length
        self.marks: tuple[int, list[int]] = (0, [])
        """The positions of the summary turns among the first ``marks[0]`` turns."""
        self.replay: object = None


class SessionTurns(list[Turn]):
    """A query's list of its session's turns, as :meth:`SessionStore.load` returns it: its first
    ``stored`` turns are those of ``log``. Its holder may append turns, never change or remove
    the ones it has."""

    __slots__ = ("log", "stored")

    def __init__(self, log: TurnLog) -> None:
        super().__init__()
        self[:] = log  # copied as a list (list(log) would iterate a list subclass item by item)
        self.log = log
        self.stored = len(log)


def parse_turns(text: str) -> list[Turn]:
    """Stored turns from their JSON; ``ValueError`` when it is not an array of objects."""
    try:
        turns = orjson.loads(text)
    except orjson.JSONDecodeError:  # NaN or Infinity, as json.dumps wrote them before orjson
        turns = json.loads(text)
    if not isinstance(turns, list):
        raise ValueError(f"a JSON {type(turns).__name__}, not an array")
    stored: list[Turn] = [StoredTurn(turn) for turn in turns if isinstance(turn, dict)]
    if len(stored) != len(turns):
        raise ValueError("an array with items that are not objects")
    return stored


def merge_log(log: TurnLog | None, known: int, length: int, text: str) -> TurnLog | None:
    """The cached turns plus what :data:`master.conversation.store._LOAD` returned for ``known`` bytes; ``None`` when they
    do not fit. New turns are appended to the cached :class:`TurnLog` in place."""
    try:
        if log is not None and length == log.length:
            return log
        if log is not None and known == log.length and text.startswith(","):
            log.extend(parse_turns("[" + text[1:]))
            log.length = length
            return log
        if text.startswith("["):
            return TurnLog(parse_turns(text), length)
    except ValueError:
        pass
    return None
