"""Several masters on one Redis (``OPENAGENT_CLUSTER=1``): each serves its own WebSocket agents
and reaches the others' through Redis. Off by default; a single master never touches it.

- :mod:`~master.cluster.remote`: an agent held by another master, as a tool-call target.
- :mod:`~master.cluster.directory`: the master's lease and the shared agent → master table.
- :mod:`~master.cluster.router`: per-master Redis stream inboxes carrying calls and results.
- :mod:`~master.cluster.collaboration`: collaborations whose agents are on different masters.

The design, its choices (streams, not pub/sub) and what is not built yet: ``docs/scale-out.md``.
"""
