"""Compact JSON bytes of what the master stores or sends (a session's turns, a run's record, an
HTTP invocation call's body), by orjson; what orjson refuses (an integer beyond 64 bits) by
:func:`json.dumps`; what JSON cannot hold, as its ``str``.

And the one nesting limit of what the master reads (:func:`too_deep`): every HTTP body
(:class:`master.asgi.JsonDepthGuard`, and the lean routes, which decline such a body to it) and
every WebSocket frame (parsed by the same pydantic-core parser) is refused beyond
:data:`MAX_JSON_DEPTH` levels, so no door's parser (the standard library's among them) can fail
with a ``RecursionError``."""

from __future__ import annotations

import json
from typing import Any

import orjson
from pydantic_core import from_json

MAX_JSON_DEPTH = 200
"""Nesting depth of JSON beyond which the master refuses it: the limit of pydantic-core's parser
(which refuses the 202nd level), the one that parses every WebSocket frame."""


def dump_json(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (keys that are not strings become strings)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), default=str).encode()


def too_deep(data: bytes | str) -> bool:
    """Whether ``data`` is JSON nested deeper than :data:`MAX_JSON_DEPTH`. Text with no more
    brackets than that cannot be: counted in C, no parse (the common case); otherwise parsed by
    pydantic-core, which stops at its limit. Text that is not JSON is not "too deep": its reader
    answers that as usual."""
    if isinstance(data, str):
        data = data.encode()
    if data.count(b"[") + data.count(b"{") <= MAX_JSON_DEPTH:
        return False
    try:
        from_json(data)
    except ValueError as exc:
        return "recursion limit" in str(exc)
    return False
