"""The master and each hub agent as A2A agents (``/a2a``, ``/a2a/agents/{agent_id}``)."""
