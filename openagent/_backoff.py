"""Delays between retries: exponential backoff with jitter.

Used when the WebSocket client reconnects (:mod:`openagent.client`) and when an invocation
agent retries its registration (:mod:`openagent.registration`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

__all__ = ["backoff_delays"]


def backoff_delays(initial: float, maximum: float) -> Iterator[float]:
    """Endless delays, in seconds: each drawn uniformly from ``[d / 2, d]``, with ``d`` starting at
    ``initial`` and doubling after each delay up to ``maximum``. The jitter keeps many agents
    from retrying in step after a master restart."""
    delay = initial
    while True:
        yield random.uniform(delay / 2, delay)
        delay = min(delay * 2, maximum)
