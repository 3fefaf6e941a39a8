"""MCP progress values keep growing whatever the agent reports (the spec's rule), within a total of 1."""

from __future__ import annotations

from master.doors.mcp.progress import next_value


def test_progress_values_grow_and_stay_within_the_total() -> None:
    reported = [None, 0.5, 0.5, None, 0.3, 0.9, None]
    values: list[float] = []
    last: float | None = None
    for fraction in reported:
        last = next_value(last, fraction)
        values.append(last)
    assert values[0] == 0.0 and values[1] == 0.5 and values[5] == 0.9
    assert all(later > earlier for earlier, later in zip(values, values[1:], strict=False)), values
    assert all(value < 1.0 for value in values)
