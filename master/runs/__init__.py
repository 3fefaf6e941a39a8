"""The run: its typed state, its store, and the verbs that start, resume and cancel it.

A run is one query's work through the orchestrator, persisted at every step boundary so that any
master can show it, resume it or cancel it.
"""
