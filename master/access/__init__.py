"""Who may do what: stored keys, JWTs, roles and permissions, the audit trail.

- :mod:`~master.access.permissions`: the :class:`Permission` each route and frame declares and
  the roles that hold it (the docs' roles table is generated from it).
- :mod:`~master.access.authenticator`: the bootstrap key, stored keys and JWTs → a
  :class:`~master.auth.Principal`.
- :mod:`~master.access.keys`: the stored keys (hashes only) in Redis.
- :mod:`~master.access.oidc`: bearer JWTs verified against the identity provider's JWKS.
- :mod:`~master.access.middleware`: 401/403 before a route reads its body.
- :mod:`~master.access.audit`: one log line and one count per administrative action.
"""

from master.access.audit import AuditAction, audit
from master.access.authenticator import Authenticator
from master.access.keys import KeyStore, StoredKey
from master.access.permissions import Permission, permission_of, permits, requires

__all__ = [
    "AuditAction",
    "Authenticator",
    "KeyStore",
    "Permission",
    "StoredKey",
    "audit",
    "permission_of",
    "permits",
    "requires",
]
