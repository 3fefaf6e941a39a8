"""Several masters on one Redis (``OPENAGENT_CLUSTER=1``): each serves its own WebSocket agents
and reaches the others' through Redis. Off by default; a single master never touches it.

- :mod:`~master.cluster.directory`: the master's lease and the shared agent → master table.
- :mod:`~master.cluster.router`: per-master Redis stream inboxes carrying calls and results.
- :mod:`~master.cluster.collaboration`: collaborations whose agents are on different masters.

The agents of other masters reach the layers below through their protocols: the dispatcher
sends calls through :class:`~master.agents.dispatch.RemoteCalls`, the agent directory lists them
through :class:`~master.agents.directory.RemoteAgents`, and a collaboration takes them in through
:class:`~master.collaboration.remote.RemoteMembers` (all passed to constructors).

The design, its choices (streams, not pub/sub) and what is not built yet: ``docs/scale-out.md``.
"""
