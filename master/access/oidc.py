"""Bearer JWTs from an organisation's identity provider (optional): :class:`JwtVerifier`.

On when ``OPENAGENT_JWT_ISSUER``, ``OPENAGENT_JWT_AUDIENCE`` and ``OPENAGENT_JWT_JWKS_URL`` are
set. A token is verified with PyJWT (signature, ``exp``, ``nbf``, ``iss``, ``aud``; only
asymmetric algorithms, so a token signed with a public key as an HMAC secret is refused); its
role and tenant come from the claims named by ``OPENAGENT_JWT_ROLE_CLAIM`` and
``OPENAGENT_JWT_TENANT_CLAIM``. The rules fail closed: ``exp`` is required and may lie at most
``OPENAGENT_JWT_MAX_LIFETIME_SECONDS`` after ``iat`` (and after now), so a leaked token does not
live forever; the tenant claim, when present, must be a string matching
:data:`master.auth.TENANT_PATTERN` (never another JSON type turned into a string, never ``*``). The JWKS is fetched with the event loop's HTTP client (never a
blocking call), kept in memory, and fetched again when a token names a key id it does not hold
(the provider rotated its keys), at most once per ``min_refresh_seconds``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

import httpx
import jwt

from master.auth import DEFAULT_TENANT, TENANT_PATTERN, Principal, Role

logger = logging.getLogger("master.access.oidc")

DEFAULT_MAX_LIFETIME_SECONDS = 86400
"""``OPENAGENT_JWT_MAX_LIFETIME_SECONDS``' default (24 h)."""
LIFETIME_LEEWAY_SECONDS = 60
"""Clock skew allowed between the identity provider and the master when judging the lifetime."""

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""The signature algorithms accepted (asymmetric only)."""


class JwtVerifier:
    """Verifies bearer JWTs against a JWKS (module docstring)."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_url: str,
        http: httpx.AsyncClient,
        role_claim: str = "role",
        tenant_claim: str = "tenant",
        max_lifetime_seconds: int = DEFAULT_MAX_LIFETIME_SECONDS,
        min_refresh_seconds: float = 10.0,
        fetch_timeout: float = 5.0,
    ) -> None:
        self._issuer = issuer
        self._audience = audience
        self._jwks_url = jwks_url
        self._http = http
        self._role_claim = role_claim
        self._tenant_claim = tenant_claim
        self._max_lifetime = max_lifetime_seconds
        self._min_refresh = min_refresh_seconds
        self._fetch_timeout = fetch_timeout
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()

    async def verify(self, token: str) -> Principal | None:
        """The principal of a valid token; ``None`` (and a log line saying why) for any other."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            logger.info("JWT refused: algorithm %r is not accepted", algorithm)
            return None
        key = await self._key(header.get("kid"))
        if key is None:
            logger.info("JWT refused: key id %r is not in the JWKS at %s", header.get("kid"), self._jwks_url)
            return None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self._audience,
                issuer=self._issuer,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            logger.info("JWT refused: %s", exc)
            return None
        try:
            role = Role(str(claims.get(self._role_claim)))
        except ValueError:
            logger.info(
                "JWT refused: claim %r is %r, not a role", self._role_claim, claims.get(self._role_claim)
            )
            return None
        why = self._lifetime_refusal(claims) or self._tenant_refusal(claims)
        if why is not None:
            logger.info("JWT refused: %s", why)
            return None
        subject = str(claims.get("sub") or claims.get("email") or "jwt")
        tenant = claims.get(self._tenant_claim)
        return Principal(
            key_id=f"jwt:{subject}",
            name=str(claims.get("email") or claims.get("preferred_username") or subject),
            role=role,
            tenant=tenant if isinstance(tenant, str) else DEFAULT_TENANT,
        )

    def _lifetime_refusal(self, claims: dict[str, Any]) -> str | None:
        """Why the token lives too long (``exp`` beyond the bound after ``iat`` or now), or ``None``."""
        exp = claims.get("exp")
        if not isinstance(exp, int | float):  # PyJWT checked it is an integer date; stay closed
            return f"claim 'exp' is {exp!r}, not a date"
        bound = self._max_lifetime + LIFETIME_LEEWAY_SECONDS
        iat = claims.get("iat")
        if isinstance(iat, int | float) and exp - iat > bound:
            return (
                f"it lives {int(exp - iat)} s (exp - iat), longer than "
                f"OPENAGENT_JWT_MAX_LIFETIME_SECONDS ({self._max_lifetime})"
            )
        if exp - time.time() > bound:
            return (
                f"it expires in {int(exp - time.time())} s, later than "
                f"OPENAGENT_JWT_MAX_LIFETIME_SECONDS ({self._max_lifetime})"
            )
        return None

    def _tenant_refusal(self, claims: dict[str, Any]) -> str | None:
        """Why the tenant claim is unusable (absent is fine: ``default``), or ``None``."""
        if self._tenant_claim not in claims or claims[self._tenant_claim] is None:
            return None
        tenant = claims[self._tenant_claim]
        if not isinstance(tenant, str) or not re.fullmatch(TENANT_PATTERN, tenant):
            return f"claim {self._tenant_claim!r} is {tenant!r}, not a tenant name ({TENANT_PATTERN})"
        return None

    async def _key(self, kid: str | None) -> jwt.PyJWK | None:
        found = self._lookup(kid)
        if found is not None:
            return found
        async with self._lock:  # one fetch for every request waiting on an unknown key id
            found = self._lookup(kid)
            fetched = self._fetched_at
            if found is None and (fetched is None or time.monotonic() - fetched >= self._min_refresh):
                await self._fetch()
                found = self._lookup(kid)
        return found

    def _lookup(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None and len(self._keys) == 1:  # a token without a key id, a JWKS of one key
            return next(iter(self._keys.values()))
        return self._keys.get(kid)

    async def _fetch(self) -> None:
        self._fetched_at = time.monotonic()
        try:
            response = await self._http.get(self._jwks_url, timeout=self._fetch_timeout)
            response.raise_for_status()
            keys = jwt.PyJWKSet.from_dict(response.json()).keys
        except (httpx.HTTPError, ValueError, jwt.PyJWTError) as exc:
            logger.warning("cannot fetch the JWKS at %s (%s): keeping the keys held", self._jwks_url, exc)
            return
        self._keys = {key.key_id: key for key in keys}
        logger.info("fetched %d signing keys from %s", len(self._keys), self._jwks_url)
