"""Every WebSocket frame of the protocol: :data:`Message`, one discriminated union on ``type``
(the models are in :mod:`protocol.messages` and :mod:`protocol.queries`, and the ``run_event`` frame in :mod:`protocol.events`)."""

from __future__ import annotations

from typing import Annotated, TypeAlias

from pydantic import BaseModel, Field, TypeAdapter

from protocol.events import RunEventFrame
from protocol.messages import (
    CollaborationEnd,
    CollaborationStart,
    ErrorMessage,
    PeerMessage,
    Ping,
    Pong,
    Register,
    Registered,
    ToolCall,
    ToolCancel,
    ToolProgress,
    ToolResult,
)
from protocol.queries import Cancel, CancelResult, Query, QueryResult

__all__ = ["MESSAGE_ADAPTER", "Message", "dump_message", "parse_message"]

Message: TypeAlias = Annotated[
    Register
    | Registered
    | Query
    | QueryResult
    | RunEventFrame
    | Cancel
    | CancelResult
    | ToolCall
    | ToolCancel
    | ToolResult
    | ToolProgress
    | CollaborationStart
    | PeerMessage
    | CollaborationEnd
    | Ping
    | Pong
    | ErrorMessage,
    Field(discriminator="type"),
]
"""Any frame of the protocol."""

MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)


def parse_message(data: str | bytes) -> Message:
    """Parse one JSON frame. Raises :class:`pydantic.ValidationError` when invalid."""
    return MESSAGE_ADAPTER.validate_json(data)


def dump_message(message: BaseModel) -> str:
    """Serialize a message to its JSON frame."""
    return message.model_dump_json()
