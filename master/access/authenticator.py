"""Who is calling: :class:`Authenticator` turns the presented credentials into a :class:`Principal`.

In order: no ``OPENAGENT_API_KEY`` set (auth off): everyone is the bootstrap administrator;
the bootstrap key itself, compared in memory in constant time (no Redis, no parsing: the path of
the benchmarks and of ``scripts/run.sh``); a stored key (``oak_...``, one Redis look-up,
:mod:`master.access.keys`); a JWT when OIDC is configured (:mod:`master.access.oidc`).
"""

from __future__ import annotations

from starlette.types import Scope

from master.access.keys import KEY_PREFIX, KeyStore
from master.access.oidc import JwtVerifier
from master.auth import BOOTSTRAP_ADMIN, Principal, key_matches, presented_key


class Authenticator:
    """Resolves the principal of a request or WebSocket (module docstring)."""

    def __init__(
        self, api_key: str | None, keys: KeyStore | None = None, jwt: JwtVerifier | None = None
    ) -> None:
        self._api_key = api_key
        self.keys = keys
        self._jwt = jwt

    def bootstrap(self, scope: Scope) -> bool:
        """Whether ``scope`` carries the bootstrap key (or auth is off): in memory, constant time."""
        return self._api_key is None or key_matches(self._api_key, presented_key(scope))

    async def resolve(self, scope: Scope) -> Principal | None:
        """The caller's principal, or ``None`` for missing or wrong credentials (401).

        Raises :class:`master.errors.SessionStoreUnavailable` when a stored key cannot be
        checked (Redis down: 503).
        """
        if self._api_key is None:
            return BOOTSTRAP_ADMIN
        presented = presented_key(scope)
        if presented is None:
            return None
        if key_matches(self._api_key, presented):
            return BOOTSTRAP_ADMIN
        if presented.startswith(KEY_PREFIX):
            if self.keys is None:
                return None
            stored = await self.keys.lookup(presented)
            return stored.principal() if stored is not None else None
        if self._jwt is not None and presented.count(".") == 2:
            return await self._jwt.verify(presented)
        return None
