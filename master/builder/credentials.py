"""Agent keys: the credential of each agent the master starts, made at start and revoked at stop.

An agent's code is not the master's: it gets a stored key of role ``agent`` whose only
``agent_ids`` pattern is its own id (escaped, so an id with ``*`` or ``[`` matches itself only),
owned by the tenant of whoever started it. With it the agent can register and serve its tools;
it cannot create keys, read other tenants' objects nor act as another agent. The bootstrap key
and administrator keys never reach agent code.
"""

from __future__ import annotations

import re

from master.access.keys import KeyStore
from master.auth import Role
from openagent.workspace.processes import AgentCredential, IssueCredential

AGENT_KEY_NAME = "agent {agent_id} (started by the master)"
"""The name of an agent's key in ``GET /keys`` and the audit lines."""


def exact_pattern(agent_id: str) -> str:
    """An ``fnmatch`` pattern that matches ``agent_id`` and nothing else."""
    return re.sub(r"([*?\[])", r"[\1]", agent_id)


class AgentKeys:
    """Makes and revokes the keys of the agents the master starts (module docstring)."""

    def __init__(self, keys: KeyStore) -> None:
        self._keys = keys

    async def make(self, agent_id: str, tenant: str) -> tuple[str, str]:
        """A new key for ``agent_id`` owned by ``tenant``: its id (to revoke it) and its secret."""
        key, secret = await self._keys.create(
            name=AGENT_KEY_NAME.format(agent_id=agent_id),
            role=Role.AGENT,
            tenant=tenant,
            agent_ids=[exact_pattern(agent_id)],
        )
        return key.key_id, secret

    async def revoke(self, key_id: str) -> None:
        """Revoke a key :meth:`make` made (nothing when it is gone already)."""
        await self._keys.revoke(key_id)

    def issuer(self, tenant: str) -> IssueCredential:
        """What the process runner calls for each agent it starts on behalf of ``tenant``."""

        async def issue(agent_id: str) -> AgentCredential:
            key_id, secret = await self.make(agent_id, tenant)

            async def revoke() -> None:
                await self.revoke(key_id)

            return AgentCredential(secret=secret, revoke=revoke)

        return issue
