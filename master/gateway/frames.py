"""What each WebSocket frame needs: :data:`FRAME_PERMISSIONS`, checked by the hub per frame.

A connection's caller is resolved at connect (:mod:`master.routes.ws`); then every frame an
agent or client sends needs a permission its role holds, else the hub answers an ``error``
``forbidden`` naming the role needed, and nothing happens. ``register`` needs ``agent`` to join
as an action agent (tools, or an invocation URL) and ``query`` to join as a query client; which
agent ids a key may take is decided by the registration itself
(:class:`master.agents.identity.AgentIds`), not here.
"""

from __future__ import annotations

from typing import get_args

from master.access.permissions import Permission, forbidden_message, permits
from master.auth import Principal
from protocol import Message, Register

FRAME_PERMISSIONS: dict[str, Permission] = {
    "ping": Permission.CONNECT,
    "register": Permission.AGENT,  # as an action agent; as a query client: QUERY (register_permission)
    "query": Permission.QUERY,
    "cancel": Permission.QUERY,
    "tool_result": Permission.AGENT,
    "tool_progress": Permission.AGENT,
    "peer_message": Permission.AGENT,
    "collaboration_end": Permission.AGENT,
}
"""The frames a connection may send, and the permission each needs."""

MASTER_FRAMES = frozenset(
    {
        "registered",
        "query_result",
        "cancel_result",
        "run_event",
        "tool_call",
        "tool_cancel",
        "collaboration_start",
        "pong",
        "error",
    }
)
"""Frames only the master sends (refused from a connection as ``invalid_message``)."""


def frame_types() -> set[str]:
    """Every ``type`` of the protocol's message union."""
    union = get_args(Message)[0]
    return {member.model_fields["type"].default for member in get_args(union)}


def register_permission(msg: Register) -> Permission:
    """``query`` for a query client (no tools, no invocation URL), else ``agent``."""
    if msg.role == "query" and not msg.tools and msg.invocation_url is None:
        return Permission.QUERY
    return Permission.AGENT


def refusal(principal: Principal, msg: Message) -> str | None:
    """Why ``principal`` may not send ``msg`` (the ``forbidden`` error's message), or ``None``."""
    permission = register_permission(msg) if isinstance(msg, Register) else FRAME_PERMISSIONS.get(msg.type)
    if permission is None:
        return None  # a master's frame: the hub refuses it itself
    if not permits(principal, permission):
        what = f"a {msg.type!r} frame" + (f" as a {msg.role} agent" if isinstance(msg, Register) else "")
        return forbidden_message(principal, permission, what)
    return None
