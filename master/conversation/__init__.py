"""Conversations: what was said in a session, and what the model sees of it.

- :mod:`~master.conversation.store`: ``session:{id}`` in Redis (load, append, delete).
- :mod:`~master.conversation.turns`: the turns one query writes (direct answer, tool call, plan, summary).
- :mod:`~master.conversation.outcome`: what the orchestrator did for one query, as the turns record it.
- :mod:`~master.conversation.history`: stored turns as chat messages for the model.
- :mod:`~master.conversation.context`: the bounded context of one query, summarizing older turns.

The store owns Redis I/O; turns and history are pure; the context builder is the only part
that calls the LLM (to summarize).
"""
