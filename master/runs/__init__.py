"""The run: its typed state, its store, and the verbs that start, resume and cancel it.

A run is one query's work through the orchestrator, persisted at every step boundary so that any
master can show it, resume it or cancel it.

- :mod:`~master.runs.state`: :class:`RunState`, what a paused, halted or lost run goes on from,
  and ``pending``, what it waits for (a tagged union).
- :mod:`~master.runs.store`: the run's record and checkpoint in Redis, the lease and the sweep.
- :mod:`~master.runs.record`: the record's shapes (the live run, as stored, as shown).
- :mod:`~master.runs.engine`: the two verbs, ``start`` and ``resume`` (by the pending kind).
- :mod:`~master.runs.held`: runs waiting for approvals: holding their calls, resuming them.
- :mod:`~master.runs.roles`: a run with ``roles``: the coordinator's host.
- :mod:`~master.runs.context`: the bounded context of a run's first round.
- :mod:`~master.runs.decisions`: what a resume brings, one decision per pending item.
- :mod:`~master.runs.work`, :mod:`~master.runs.extras`: what a run works with, what a door adds.
"""
