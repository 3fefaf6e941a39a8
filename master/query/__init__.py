"""Answering one query, whatever its door (``POST /query`` as JSON or SSE, a WebSocket ``query`` frame).

- :mod:`~master.query.entry`: :meth:`QueryEntry.submit`, the one entry point every door calls:
  admission, the run as an owned task, events for streaming, the internal-error fallback.
- :mod:`~master.query.events`: what a door gets back (a refusal, progress events, the outcome).
- :mod:`~master.query.service`: validates the request, loads the session, prepares the run
  (tools, hooks, attachments) and has :mod:`master.runs.engine` start or resume it, then records
  the turns.
- :mod:`~master.query.setup`: what a run is given before it starts (session, tools, hooks, files).
- :mod:`~master.query.verbs`: ``start`` and ``resume(run_id, decisions, principal)`` for routes and doors.
- :mod:`~master.query.admission`: the cap on queries in flight over the master, and draining.
"""
