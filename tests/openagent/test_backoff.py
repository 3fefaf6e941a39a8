"""Retry delays: jittered, doubling, capped."""

from __future__ import annotations

import itertools

from openagent._backoff import backoff_delays


def test_delays_double_from_initial_up_to_maximum_with_jitter() -> None:
    delays = list(itertools.islice(backoff_delays(0.5, 3.0), 6))

    bounds = [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert all(bound / 2 <= delay <= bound for delay, bound in zip(delays, bounds, strict=True)), delays


def test_delays_are_jittered() -> None:
    assert len({next(backoff_delays(1.0, 1.0)) for _ in range(20)}) > 1
