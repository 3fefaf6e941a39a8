"""Bearer JWTs: a JWKS served on loopback, tokens signed by its keys (and by others)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from master.access.oidc import JwtVerifier
from master.auth import Role
from tests.factories import in_process_master, serve_app

ISSUER = "https://login.example.test/realms/hub"
AUDIENCE = "openagent"
KEY = "oidc-bootstrap-key"


class Provider:
    """An identity provider's JWKS endpoint, whose keys a test can rotate; counts its fetches."""

    def __init__(self) -> None:
        self.keys: dict[str, RSAPrivateKey] = {"k1": new_key()}
        self.fetches = 0

    def app(self) -> Starlette:
        async def jwks(request: Request) -> JSONResponse:
            self.fetches += 1
            found = []
            for kid, key in self.keys.items():
                jwk: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
                found.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
            return JSONResponse({"keys": found})

        return Starlette(routes=[Route("/jwks", jwks)])

    def token(self, kid: str = "k1", *, key: RSAPrivateKey | None = None, **claims: Any) -> str:
        body = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "u-42",
            "email": "ada@example.test",
            "exp": int(time.time()) + 600,
            "role": "client",
            "tenant": "team-a",
            **claims,
        }
        return jwt.encode(body, key or self.keys[kid], algorithm="RS256", headers={"kid": kid})


def new_key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
async def provider() -> AsyncIterator[tuple[Provider, str]]:
    found = Provider()
    async with serve_app(found.app()) as url:
        yield found, f"{url}/jwks"


async def test_the_master_accepts_a_valid_token_and_refuses_the_others(
    provider: tuple[Provider, str],
) -> None:
    idp, jwks_url = provider
    settings = {
        "openagent_api_key": KEY,
        "openagent_jwt_issuer": ISSUER,
        "openagent_jwt_audience": AUDIENCE,
        "openagent_jwt_jwks_url": jwks_url,
    }
    async with in_process_master(**settings) as master, httpx.AsyncClient(base_url=master.base_url) as http:

        async def whoami(token: str) -> httpx.Response:
            return await http.get("/whoami", headers={"Authorization": f"Bearer {token}"}, timeout=30)

        me = await whoami(idp.token())
        assert me.status_code == 200, me.text
        assert (me.json()["role"], me.json()["tenant"], me.json()["name"]) == (
            "client",
            "team-a",
            "ada@example.test",
        )
        # The role holds: a client token may not list keys.
        listed = await http.get("/keys", headers={"Authorization": f"Bearer {idp.token()}"})
        assert listed.status_code == 403 and "'admin'" in listed.text

        refused = {
            "expired": idp.token(exp=int(time.time()) - 60),
            "wrong audience": idp.token(aud="someone-else"),
            "wrong issuer": idp.token(iss="https://evil.example.test"),
            "bad signature": idp.token(key=new_key()),
            "no role": idp.token(role=None),
            "a tenant that is an object": idp.token(tenant={"a": 1}),
            "a tenant that is a number": idp.token(tenant=7),
            "the tenant '*'": idp.token(tenant="*"),
            "an empty tenant": idp.token(tenant=""),
            "no exp": jwt.encode(
                {"iss": ISSUER, "aud": AUDIENCE, "role": "client"}, idp.keys["k1"], "RS256", {"kid": "k1"}
            ),
            "an exp in 2999": idp.token(exp=32503680000),
            "a lifetime over 24 h": idp.token(iat=int(time.time()), exp=int(time.time()) + 2 * 86400),
            "unknown role": idp.token(role="root"),
            "HMAC with the public key": jwt.encode(
                {"iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60, "role": "admin"},
                "a-shared-secret-of-at-least-32-bytes!!",
                algorithm="HS256",
                headers={"kid": "k1"},
            ),
        }
        for case, token in refused.items():
            response = await whoami(token)
            assert response.status_code == 401, (case, response.text)
            assert response.json()["error_code"] == "unauthorized"


async def test_the_lifetime_bound_is_a_setting(provider: tuple[Provider, str]) -> None:
    idp, jwks_url = provider
    settings = {
        "openagent_api_key": KEY,
        "openagent_jwt_issuer": ISSUER,
        "openagent_jwt_audience": AUDIENCE,
        "openagent_jwt_jwks_url": jwks_url,
        "openagent_jwt_max_lifetime_seconds": 300,
    }
    async with in_process_master(**settings) as master, httpx.AsyncClient(base_url=master.base_url) as http:

        async def whoami(token: str) -> int:
            response = await http.get("/whoami", headers={"Authorization": f"Bearer {token}"}, timeout=30)
            return response.status_code

        now = int(time.time())
        assert await whoami(idp.token(iat=now, exp=now + 240)) == 200
        assert await whoami(idp.token(exp=now + 600)) == 401  # no iat: judged from now
        assert await whoami(idp.token(iat=now - 3000, exp=now + 60)) == 401  # issued to live 51 min


async def test_the_jwks_is_cached_and_fetched_again_for_an_unknown_key_id(
    provider: tuple[Provider, str],
) -> None:
    idp, jwks_url = provider
    async with httpx.AsyncClient() as http:
        verifier = JwtVerifier(
            issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks_url, http=http, min_refresh_seconds=0
        )
        for _ in range(3):
            principal = await verifier.verify(idp.token())
            assert principal is not None and principal.role is Role.CLIENT
        assert idp.fetches == 1  # cached
        idp.keys["k2"] = new_key()  # the provider rotates its keys
        admin = await verifier.verify(idp.token("k2", role="admin"))
        assert admin is not None and admin.role is Role.ADMIN and idp.fetches == 2
        assert await verifier.verify(idp.token("k3", key=new_key())) is None  # still unknown after a fetch
        assert idp.fetches == 3


async def test_an_unknown_key_id_does_not_refetch_within_the_minimum_interval(
    provider: tuple[Provider, str],
) -> None:
    idp, jwks_url = provider
    async with httpx.AsyncClient() as http:
        verifier = JwtVerifier(
            issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks_url, http=http, min_refresh_seconds=3600
        )
        assert await verifier.verify(idp.token()) is not None
        for _ in range(5):  # a flood of made-up key ids costs the provider nothing
            assert await verifier.verify(idp.token("made-up", key=new_key())) is None
        assert idp.fetches == 1
