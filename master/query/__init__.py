"""Answering one query, from ``POST /query`` (JSON or SSE) or a WebSocket ``query`` frame.

- :mod:`~master.query.service`: validates the request, loads the session, builds the context,
  runs the orchestrator and records the turns. One code path for every entry point.
- :mod:`~master.query.streaming`: the same run as Server-Sent Events.
- :mod:`~master.query.admission`: the caps on queries in flight (per connection, per master).
"""
