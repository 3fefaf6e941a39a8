"""Compact JSON bytes of what the master stores or sends (a session's turns, a run's record, an
HTTP invocation call's body), by orjson; what orjson refuses (an integer beyond 64 bits) by
:func:`json.dumps`; what JSON cannot hold, as its ``str``."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dump_json(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (keys that are not strings become strings)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), default=str).encode()
