"""Answering one query, whatever its door (``POST /query`` as JSON or SSE, a WebSocket ``query`` frame).

- :mod:`~master.query.entry`: :meth:`QueryEntry.submit`, the one entry point every door calls:
  admission, the run as an owned task, events for streaming, the internal-error fallback.
- :mod:`~master.query.events`: what a door gets back (a refusal, progress events, the outcome).
- :mod:`~master.query.service`: validates the request, loads the session, builds the context,
  runs the orchestrator and records the turns.
- :mod:`~master.query.roles`: a query with ``roles``: the coordinator's host (models, executor,
  persistence after every transition, a critic's disagreement as an approval).
- :mod:`~master.query.admission`: the cap on queries in flight over the master, and draining.
"""
