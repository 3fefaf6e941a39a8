"""The OpenAgent benchmark: what the master adds to a tool call, against baselines run alike.

``python -m bench`` (or ``make bench``) starts a Redis-backed master, baseline hubs,
agents and load clients as separate processes on loopback, runs each case for a bounded
time after a warm-up, repeats it, prints a table with each target's ratio and verdict,
and writes the results as JSON to ``bench/results/latest.json`` (plus a timestamped copy
in ``bench/results/runs/``). ``python -m bench --help`` lists the options.

Modules: :mod:`~bench.cli` (the command), :mod:`~bench.cases` and :mod:`~bench.targets`
(what is measured and judged), :mod:`~bench.setups` (the systems under test),
:mod:`~bench.throughput`, :mod:`~bench.connections`, :mod:`~bench.redis_trips` and
:mod:`~bench.session_growth` (how), :mod:`~bench.report` (table and JSON), and the
child processes: :mod:`~bench.launcher` (master, scripted LLM), :mod:`~bench.relays`
(baselines), :mod:`~bench.agents`, :mod:`~bench.load`, :mod:`~bench.swarm`.
"""
