"""The OpenAI-compatible door: ``GET /v1/models`` and ``POST /v1/chat/completions``.

A chat completion is a query through :meth:`master.query.entry.QueryEntry.submit` (door
``openai``): admission, budgets, draining, metrics and traces are the entry's. What the door adds
is the translation (:mod:`master.doors.openai.wire`):

- the question is the last user message; without a session id the earlier messages are the new
  session's context; with one (header ``X-OpenAgent-Session-Id`` or ``metadata.session_id``) the
  server's session is used and the earlier messages are ignored;
- the request's function ``tools`` are the asker's own: when the model calls one, the answer ends
  with ``finish_reason: "tool_calls"``; a request whose messages end with the ``tool`` results
  continues that run (kept in Redis, :meth:`master.conversation.store.SessionStore.pause`);
- a streamed answer is OpenAI's chunks: the role, the content as the model writes it, the tool
  steps as ``delta.reasoning_content`` (or a ``<think>`` block), the finish reason, the usage
  when asked for, ``[DONE]``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response, StreamingResponse

from master.agents.directory import AgentDirectory
from master.auth import Principal, Scope
from master.doors.openai import wire
from master.doors.openai.wire import DONE, SESSION_HEADER, OpenAIError, chunk, error_body
from master.gateway.drain import RETRY_AFTER_SECONDS as DRAIN_RETRY_AFTER
from master.query.admission import DRAINING
from master.query.entry import QueryEntry, QueryRun
from master.query.events import Progress, QueryRefused
from master.query.verbs import RunVerbs, start_or_bring
from master.settings import Settings
from protocol import (
    ErrorCode,
    QueryResponse,
    RunEvent,
    StepEvent,
    TokenEvent,
    ToolCallEvent,
    ToolProgressEvent,
    ToolResultEvent,
)

RETRY_AFTER_SECONDS = 1
"""``Retry-After`` of a 429 (too many queries in flight); a draining master's 503 has the drain's."""


def error_response(
    code: ErrorCode | str, message: str, status: int, param: str | None = None, retry_after: int | None = None
) -> Response:
    """An error in OpenAI's shape (``Retry-After`` when given)."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return Response(
        json.dumps(error_body(code, message, status, param)),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


class OpenAIDoor:
    """Answers the OpenAI-compatible API through the query entry (see the module docstring)."""

    def __init__(self, entry: QueryEntry, agents: AgentDirectory, settings: Settings) -> None:
        self._entry = entry
        self._agents = agents
        self._settings = settings
        self._created = int(time.time())

    def models(self, principal: Principal) -> dict[str, Any]:
        """``openagent`` and ``openagent/<agent_id>`` for every agent with tools offered to
        ``principal``, cluster-wide."""
        targets = self._agents.tool_targets(Scope.of(principal))
        ids = dict.fromkeys(target.agent_id for target in targets)
        return {
            "object": "list",
            "data": [
                wire.model_entry(wire.MODEL, self._created),
                *(wire.model_entry(f"{wire.MODEL}/{agent_id}", self._created) for agent_id in ids),
            ],
        }

    async def chat(self, raw: bytes, session_header: str | None, principal: Principal) -> Response:
        """``POST /v1/chat/completions``: a ``chat.completion``, or a stream of chunks
        (``session_header``: the request's ``X-OpenAgent-Session-Id``; ``principal``: who asks)."""
        request = self.read(raw, session_header)
        if isinstance(request, Response):
            return request
        return await self.answer(request, principal)

    def read(self, raw: bytes, session_header: str | None) -> wire.ChatRequest | Response:
        """The request, read; or the error that answers it."""
        try:
            return wire.parse_chat_request(
                raw,
                session_header,
                auto_mode=self._settings.openagent_openai_auto_mode,
                new_session_id=lambda: str(uuid.uuid4()),
            )
        except OpenAIError as exc:
            return error_response(exc.code, exc.message, exc.status, exc.param)

    async def answer(self, request: wire.ChatRequest, principal: Principal) -> Response:
        """Run a request read by :meth:`read`: a ``chat.completion``, or a stream of chunks.
        Another tenant's session (``X-OpenAgent-Session-Id``, or the paused run of tool results)
        is unknown to ``principal``."""
        query_id = f"openai-{uuid.uuid4().hex}"
        try:
            run = await start_or_bring(
                RunVerbs(self._entry),
                (request.query, request.extras, query_id),
                principal,
                door="openai",
                stream=request.stream,
            )
        except QueryRefused as exc:
            code = ErrorCode.of(exc.code)
            retry = DRAIN_RETRY_AFTER if code == DRAINING else RETRY_AFTER_SECONDS
            return error_response(code, exc.message, code.status, retry_after=retry)
        completion_id = f"chatcmpl-{query_id.removeprefix('openai-')}"
        if request.stream:
            known = request.query.session_id or request.extras.new_session_id
            return StreamingResponse(
                self._chunks(run, request, completion_id),
                media_type="text/event-stream",
                headers={
                    "Cache-Control": "no-cache",
                    "X-Accel-Buffering": "no",
                    **({SESSION_HEADER: known} if known else {}),
                },
            )
        response = await run.result()
        if not response.success:
            return self._failure(response, request)
        return Response(
            json.dumps(wire.completion(completion_id, request.model, response), separators=(",", ":")),
            media_type="application/json",
            headers={SESSION_HEADER: response.session_id} if response.session_id else None,
        )

    def _failure(self, response: QueryResponse, request: wire.ChatRequest) -> Response:
        code, status, param = self._error_of(response, request)
        return error_response(code, response.error or "the query failed", status, param)

    def _error_of(
        self, response: QueryResponse, request: wire.ChatRequest
    ) -> tuple[ErrorCode, int, str | None]:
        code = ErrorCode.of(response.error_code or ErrorCode.INTERNAL_ERROR)
        if code == ErrorCode.UNKNOWN_AGENT and request.agent_scope is not None:
            return ErrorCode.UNKNOWN_MODEL, 404, "model"  # the model named an agent no one knows
        if code == ErrorCode.UNKNOWN_SESSION:
            return code, code.status, "metadata.session_id"
        return code, code.status, None

    async def _chunks(
        self, run: QueryRun, request: wire.ChatRequest, completion_id: str
    ) -> AsyncIterator[bytes]:
        """The run as OpenAI's chunks (module docstring); a failure after the start is an
        ``error`` event (the ``openai`` clients raise it), then ``[DONE]``."""
        model, created = request.model, int(time.time())
        more: dict[str, Any] = {"usage": None} if request.include_usage else {}
        think = self._settings.openagent_openai_think_tags
        yield chunk(completion_id, model, created, {"role": "assistant", "content": ""}, **more)
        answer: list[str] = []  # the text of the current round (a tool round starts a new one)
        thinking = False
        async for event in run.events():
            if isinstance(event, Progress):
                typed = event.event
                if isinstance(typed, TokenEvent):
                    text = typed.text
                    if think and thinking:
                        thinking = False
                        yield chunk(completion_id, model, created, {"content": "</think>\n\n"}, **more)
                    answer.append(text)
                    yield chunk(completion_id, model, created, {"content": text}, **more)
                    continue
                line = _step_line(typed)
                if isinstance(typed, StepEvent):
                    answer.clear()
                if line is None:
                    continue
                if think:
                    if not thinking:
                        thinking = True
                        line = "<think>\n" + line
                    yield chunk(completion_id, model, created, {"content": line}, **more)
                else:
                    yield chunk(completion_id, model, created, {"reasoning_content": line}, **more)
                continue
            response = event.response
            if thinking:
                yield chunk(completion_id, model, created, {"content": "</think>\n\n"}, **more)
            if not response.success:
                code, status, param = self._error_of(response, request)
                body = error_body(code, response.error or "the query failed", status, param)
                yield wire.event(body)
                yield DONE
                return
            streamed = "".join(answer)
            final = response.answer or ""
            rest = final[len(streamed) :] if final.startswith(streamed) else ("" if streamed else final)
            if rest:
                yield chunk(completion_id, model, created, {"content": rest}, **more)
            calls = wire.tool_calls(response)
            if calls:
                delta = {"tool_calls": [{"index": i, **call} for i, call in enumerate(calls)]}
                yield chunk(completion_id, model, created, delta, **more)
            reason = "tool_calls" if calls else "stop"
            yield chunk(completion_id, model, created, {}, reason, openagent=wire.extras(response), **more)
            if request.include_usage:
                yield wire.event(
                    {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": wire.usage(response),
                    }
                )
            yield DONE
            return
        # The run was cancelled (the master stopped): end the stream as an error.
        yield wire.event(error_body(ErrorCode.INTERNAL_ERROR, "the master stopped before answering", 500))
        yield DONE


def _step_line(event: RunEvent) -> str | None:
    """A tool step in words, for the reasoning shown apart from the answer."""
    if not isinstance(event, ToolCallEvent | ToolProgressEvent | ToolResultEvent):
        return None
    name = f"{event.agent_id}.{event.tool_name}" if event.agent_id else event.tool_name
    if isinstance(event, ToolCallEvent):
        return f"Calling {name} with {wire.compact(event.arguments)}\n"
    if isinstance(event, ToolProgressEvent):
        share = f" {event.progress:.0%}" if event.progress is not None else ""
        return f"{name}{share}: {event.message or '...'}\n"
    if event.success:
        return f"{name} returned {wire.compact(event.result)[:2000]}\n"
    return f"{name} failed: {event.error}\n"
