"""The A2A routes: the hub at ``/a2a`` (card at ``/.well-known/agent-card.json`` and
``/a2a/.well-known/agent-card.json``), each hub agent at ``/a2a/agents/{agent_id}`` (card under
it), the JSON-RPC endpoints with or without a trailing slash, answered by :class:`master.doors.a2a.A2ADoor`.

Declared here when the app is created, from the SDK's own route table
(:func:`master.doors.a2a.route_specs`), and answered by the door the lifespan built. They are
plain Starlette routes, outside the OpenAPI document (A2A describes itself with its cards). Every
one needs the ``query`` permission (:func:`master.access.permission_of` reads the marker), the
cards ``read`` (any key), or none with ``OPENAGENT_A2A_PUBLIC_CARDS`` on.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from master.access import Permission
from master.deps import Services
from master.doors.a2a import CARD_ROUTES, PREFIXES, route_specs


class A2ARoute(Route):
    """A Starlette route of the A2A door; ``permission`` is read by :func:`master.access.permission_of`."""

    def __init__(self, path: str, endpoint: object, *, methods: list[str], permission: Permission) -> None:
        super().__init__(path, endpoint, methods=methods, include_in_schema=False)  # type: ignore[arg-type]
        self.permission = permission


def _door_endpoint(path: str, method: str) -> object:
    async def endpoint(request: Request) -> Response:
        services: Services = request.app.state.services
        return await services.a2a.endpoint(path, method)(request)

    return endpoint


async def _card(request: Request) -> Response:
    services: Services = request.app.state.services
    return await services.a2a.card(request)


def routes(*, public_cards: bool) -> tuple[list[Route], list[Route]]:
    """Every A2A route: the JSON-RPC endpoints (``POST /a2a``, ``POST /a2a/agents/{agent_id}``),
    which the app puts first (a request walks the route table twice, in the auth check and the
    router: about 0.6 ms for the last of its 90 routes), then the others, cards first."""
    hot: list[Route] = []
    rest: list[Route] = [
        A2ARoute(
            path, _card, methods=["GET"], permission=Permission.OPEN if public_cards else Permission.READ
        )
        for path in CARD_ROUTES
    ]
    for path, methods in route_specs():
        for method in sorted(methods - {"HEAD"}):
            endpoint = _door_endpoint(path, method)
            route = A2ARoute(path, endpoint, methods=[method], permission=Permission.QUERY)
            if path in PREFIXES and method == "POST":
                # Also with a trailing slash, answered alike (not a 307 that some clients do not follow).
                slashed = A2ARoute(f"{path}/", endpoint, methods=[method], permission=Permission.QUERY)
                hot.append(route)
                rest.append(slashed)
            else:
                rest.append(route)
    return hot, rest
