"""A Responses API answer as its events (``stream: true``): ``response.created`` to
``response.completed`` (``response.incomplete``, ``response.failed``), and the response object a
run ends with (:func:`finished_body`), streamed or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections.abc import AsyncIterator
from typing import Any

from master.doors.openai import responses_wire as rwire
from master.query.entry import QueryRun
from master.query.events import Progress
from protocol import ErrorCode, QueryResponse, TokenEvent

STORE_WAIT_SECONDS = 30.0
"""How long a stream's last event waits for its response to be stored (the write's own timeout
is ``REDIS_QUERY_TIMEOUT_SECONDS``)."""


async def stream_events(
    run: QueryRun,
    response_id: str,
    echo: dict[str, Any],
    created: float,
    message_id: str,
    kept: asyncio.Task[None] | None,
) -> AsyncIterator[bytes]:
    """The run as the Responses events (module docstring). A stored response is written
    (``kept``) before the last event, so that the client's next request finds it."""
    numbers = itertools.count()

    def event(kind: str, **fields: Any) -> bytes:
        return rwire.sse(kind, next(numbers), fields)

    async def stored() -> None:
        if kept is not None:
            with contextlib.suppress(TimeoutError):  # the write has its own timeout
                await asyncio.wait_for(asyncio.shield(kept), STORE_WAIT_SECONDS)

    start = rwire.response_object(response_id, echo, created_at=created, status="in_progress")
    yield event("response.created", response=start)
    yield event("response.in_progress", response=start)
    streamed: list[str] = []
    where = {"item_id": message_id, "output_index": 0, "content_index": 0}
    async for update in run.events():
        if isinstance(update, Progress):
            if not isinstance(update.event, TokenEvent):
                continue
            text = update.event.text
            if not streamed:
                item = rwire.message_item(message_id, "", "in_progress")
                yield event("response.output_item.added", output_index=0, item=item)
                part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                yield event("response.content_part.added", **where, part=part)
            streamed.append(text)
            yield event("response.output_text.delta", **where, delta=text, logprobs=[])
            continue
        answer = update.response
        if not answer.success:
            code, _, _ = error_of(answer)
            error = rwire.error_object(code, answer.error or "the query failed")
            body = rwire.response_object(
                response_id, echo, created_at=created, status="failed", answer=answer, error=error
            )
            await stored()
            yield event("response.failed", response=body)
            return
        so_far = "".join(streamed)
        final = answer.answer or ""
        rest = final[len(so_far) :] if final.startswith(so_far) else ("" if so_far else final)
        text = so_far + rest
        if text and not streamed:
            item = rwire.message_item(message_id, "", "in_progress")
            yield event("response.output_item.added", output_index=0, item=item)
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield event("response.content_part.added", **where, part=part)
        if rest:
            yield event("response.output_text.delta", **where, delta=rest, logprobs=[])
        if text:
            yield event("response.output_text.done", **where, text=text, logprobs=[])
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            yield event("response.content_part.done", **where, part=part)
            item = rwire.message_item(message_id, text)
            yield event("response.output_item.done", output_index=0, item=item)
        index = 1 if text else 0
        for call in rwire.function_call_items(answer):
            opened = {**call, "arguments": "", "status": "in_progress"}
            yield event("response.output_item.added", output_index=index, item=opened)
            at = {"item_id": call["id"], "output_index": index}
            yield event("response.function_call_arguments.delta", **at, delta=call["arguments"])
            yield event("response.function_call_arguments.done", **at, arguments=call["arguments"])
            yield event("response.output_item.done", output_index=index, item=call)
            index += 1
        for approval in rwire.approval_items(answer):
            yield event("response.output_item.added", output_index=index, item=approval)
            yield event("response.output_item.done", output_index=index, item=approval)
            index += 1
        body = finished_body(response_id, echo, created, answer, message_id, text)
        kind = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
        await stored()
        yield event(kind, response=body)
        return
    # The run was cancelled (by a cancel, or the master stopping).
    error = rwire.error_object(ErrorCode.INTERNAL_ERROR, "the run was cancelled before it answered")
    body = rwire.response_object(response_id, echo, created_at=created, status="cancelled", error=error)
    yield event("response.failed", response=body)


def finished_body(
    response_id: str,
    echo: dict[str, Any],
    created: float,
    answer: QueryResponse,
    message_id: str | None = None,
    text: str | None = None,
) -> dict[str, Any]:
    error = None
    if not answer.success:
        code, _, _ = error_of(answer)
        error = rwire.error_object(code, answer.error or "the query failed")
    output = rwire.output_of(answer, message_id or f"msg_{secrets.token_hex(16)}", text)
    return rwire.response_object(
        response_id,
        echo,
        created_at=created,
        status=rwire.status_of(answer),
        output=output,
        answer=answer,
        error=error,
    )


def error_of(response: QueryResponse) -> tuple[ErrorCode, int, str | None]:
    code = ErrorCode.of(response.error_code or ErrorCode.INTERNAL_ERROR)
    if code == ErrorCode.UNKNOWN_AGENT:
        return ErrorCode.UNKNOWN_MODEL, 404, "model"
    if code == ErrorCode.UNKNOWN_SESSION:
        return code, code.status, "previous_response_id"
    return code, code.status, None
