"""Percentiles and the min / median / max spread over repetitions."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0..100) of ``values``; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def latency_summary(latencies_s: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max in milliseconds."""
    return {
        "p50_ms": percentile(latencies_s, 50) * 1000,
        "p99_ms": percentile(latencies_s, 99) * 1000,
        "max_ms": (max(latencies_s) * 1000) if latencies_s else math.nan,
    }


def spread(values: Sequence[float]) -> dict[str, float]:
    """min / median / max of one figure over the repetitions."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return {"min": math.nan, "median": math.nan, "max": math.nan}
    return {"min": min(finite), "median": statistics.median(finite), "max": max(finite)}
