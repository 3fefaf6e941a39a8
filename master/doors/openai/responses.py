"""The Responses API door: ``POST /v1/responses``, ``GET``/``DELETE /v1/responses/{id}`` and
``POST /v1/responses/{id}/cancel``.

A response is a query through :meth:`master.query.entry.QueryEntry.submit` (door ``responses``),
read as the chat-completions request it amounts to (:mod:`master.doors.openai.responses_wire`):
the chat door's session rules, client tools and hub tools hold as they are. What this door adds:

- **stored responses** (``store``, the default): the response object is kept in Redis
  (:class:`ResponseStore`, tenant-scoped) with its run and session, so ``previous_response_id``
  continues that session on any master, and ``GET /v1/responses/{id}`` reads it on any master;
- **background** (``background: true``): the answer is at once ``in_progress``; the run goes on in
  the master that took it, which writes the response when it ends. ``GET`` of one still in progress
  reads its run's record too (a run whose master was lost reads ``failed``); ``cancel`` marks it
  ``cancelled`` in Redis and cancels its run through the one cancel of every door
  (:meth:`master.query.entry.QueryEntry.cancel`: stopped on whichever master holds it);
- **approvals**: a call that waits for a person is an ``mcp_approval_request`` output item whose
  id is the approval's; an ``mcp_approval_response`` input item decides it
  (:class:`master.query.approvals.ApprovalDesk`, as every door's decision) and, once the round is
  decided, the run goes on and this request answers with its end;
- **streaming** (``stream: true``): the Responses events, ``response.created`` to
  ``response.completed`` (``response.incomplete``, ``response.failed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import secrets
import time
import uuid
from typing import Any

from starlette.responses import Response, StreamingResponse

from master.auth import DEFAULT_TENANT, Principal, Scope
from master.doors.openai import responses_wire as rwire
from master.doors.openai import wire
from master.doors.openai.door import RETRY_AFTER_SECONDS, error_response
from master.doors.openai.responses_stream import error_of, finished_body, stream_events
from master.doors.openai.wire import SESSION_HEADER, OpenAIError
from master.errors import SessionStoreUnavailable
from master.gateway.drain import RETRY_AFTER_SECONDS as DRAIN_RETRY_AFTER
from master.query.admission import DRAINING
from master.query.approvals import ApprovalDesk
from master.query.entry import CancelRefused, QueryEntry, QueryRun
from master.query.events import QueryRefused
from master.query.verbs import RunRefused, RunVerbs, start_or_bring
from master.runs.decisions import Approve, Reject
from master.runs.responses import ResponseStore
from master.runs.store import RunStore
from master.settings import Settings
from protocol import ErrorCode, QueryResponse

logger = logging.getLogger("master.doors.openai.responses")

CANCEL_FIND_SECONDS = 5.0
"""How long a cancel waits for a background response's run to be recorded (it is as soon as the
master that took it accepted its request) before it gives up on stopping it."""


class ResponsesDoor:
    """Answers the Responses API through the query entry (see the module docstring)."""

    def __init__(
        self,
        entry: QueryEntry,
        settings: Settings,
        store: ResponseStore,
        *,
        approvals: ApprovalDesk | None,
        master_id: str,
    ) -> None:
        self._entry = entry
        self._settings = settings
        self._store = store
        self._approvals = approvals
        self._master_id = master_id
        self._running: dict[str, QueryRun] = {}
        """This master's background responses still running, by response id."""
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ create

    async def create(self, raw: bytes, session_header: str | None, principal: Principal) -> Response:
        """``POST /v1/responses``: a ``response`` object (``in_progress`` for a background one), or
        the Responses event stream."""
        request = self.read(raw)
        if isinstance(request, Response):
            return request
        return await self.answer(request, session_header, principal)

    def read(self, raw: bytes) -> rwire.ResponsesRequest | Response:
        """The request, read; or the error that answers it."""
        try:
            return rwire.read_request(raw)
        except OpenAIError as exc:
            return error_response(exc.code, exc.message, exc.status, rwire.param(exc.param))

    async def answer(
        self, request: rwire.ResponsesRequest, session_header: str | None, principal: Principal
    ) -> Response:
        """Run a request read by :meth:`read` (``session_header``: its ``X-OpenAgent-Session-Id``)."""
        scope = Scope.of(principal)
        try:
            session_id = (session_header or "").strip() or None
            if request.previous_response_id is not None:
                session_id = await self._session_of(request.previous_response_id, scope)
            chat = None
            if request.chat is not None:
                chat = wire.read_chat_body(
                    request.chat,
                    session_id,
                    auto_mode=self._settings.openagent_openai_auto_mode,
                    new_session_id=lambda: str(uuid.uuid4()),
                )
        except OpenAIError as exc:
            return error_response(exc.code, exc.message, exc.status, rwire.param(exc.param))
        except SessionStoreUnavailable as exc:
            code = ErrorCode.SESSION_STORE_UNAVAILABLE
            return error_response(code, str(exc), code.status)
        response_id = f"resp_{secrets.token_hex(16)}"
        echo = {**request.body, "store": request.store, "background": request.background}
        created = time.time()
        try:
            if chat is not None:
                extras = (
                    dataclasses.replace(chat.extras, announce=True) if request.background else chat.extras
                )
                started: QueryRun | QueryResponse = await start_or_bring(
                    RunVerbs(self._entry, self._approvals),
                    (chat.query, extras, f"responses-{response_id.removeprefix('resp_')}"),
                    principal,
                    door="responses",
                    stream=request.stream,
                )
            else:
                started = await self._decide(request.decisions, principal, stream=request.stream)
        except QueryRefused as exc:
            code = ErrorCode.of(exc.code)
            retry = DRAIN_RETRY_AFTER if code == DRAINING else RETRY_AFTER_SECONDS
            return error_response(code, exc.message, code.status, retry_after=retry)
        except OpenAIError as exc:
            return error_response(exc.code, exc.message, exc.status, exc.param)
        if isinstance(started, QueryResponse):  # approvals still wait: nothing ran
            waiting = {
                "tenant": principal.tenant if principal.tenant != DEFAULT_TENANT else None,
                "holder": self._master_id,
                "run_id": started.run_id,
            }
            stored = waiting if request.store else None
            return await self._answer(response_id, echo, created, started, stored=stored)
        run = started
        base = {
            "tenant": principal.tenant if principal.tenant != DEFAULT_TENANT else None,
            "holder": self._master_id,
            "run_id": run.run_id,
            "session_id": (chat.query.session_id or chat.extras.new_session_id) if chat else None,
        }
        message_id = f"msg_{secrets.token_hex(16)}"
        if request.background:
            pending = rwire.response_object(response_id, echo, created_at=created, status="in_progress")
            try:
                await self._store.put({**base, "response": pending})
            except SessionStoreUnavailable as exc:
                run.cancel()
                code = ErrorCode.SESSION_STORE_UNAVAILABLE
                return error_response(code, str(exc), code.status)
            self._running[response_id] = run
            kept: asyncio.Task[None] | None = self._keep(run, response_id, echo, created, base, message_id)
            if not request.stream:
                return _json(pending)
        elif request.store and request.stream:
            kept = self._keep(run, response_id, echo, created, base, message_id)
        else:
            kept = None
        if request.stream:
            known = base["session_id"]
            return StreamingResponse(
                stream_events(run, response_id, echo, created, message_id, kept),
                media_type="text/event-stream",
                headers={
                    "Cache-Control": "no-cache",
                    "X-Accel-Buffering": "no",
                    **({SESSION_HEADER: known} if known else {}),
                },
            )
        answer = await run.result()
        if not answer.success:
            code, status, param = error_of(answer)
            return error_response(code, answer.error or "the query failed", status, param)
        stored = base if request.store else None
        return await self._answer(response_id, echo, created, answer, stored=stored, message_id=message_id)

    async def _answer(
        self,
        response_id: str,
        echo: dict[str, Any],
        created: float,
        answer: QueryResponse,
        *,
        stored: dict[str, Any] | None,
        message_id: str | None = None,
    ) -> Response:
        body = finished_body(response_id, echo, created, answer, message_id)
        if stored is not None:
            try:
                await self._store.put({**stored, "session_id": answer.session_id, "response": body})
            except SessionStoreUnavailable as exc:
                code = ErrorCode.SESSION_STORE_UNAVAILABLE
                return error_response(code, str(exc), code.status)
        headers = {SESSION_HEADER: answer.session_id} if answer.session_id else None
        return _json(body, headers)

    async def _session_of(self, response_id: str, scope: Scope) -> str | None:
        record = await self._store.get(response_id, scope)
        if record is None:
            raise OpenAIError(
                ErrorCode.NOT_FOUND,
                f"previous response {response_id!r} not found (never stored, deleted, expired, or "
                "another tenant's)",
                param="previous_response_id",
                status=404,
            )
        session_id = record.get("session_id")
        return str(session_id) if session_id else None

    async def _decide(
        self, decisions: list[dict[str, Any]], principal: Principal, *, stream: bool
    ) -> QueryRun | QueryResponse:
        """Take the ``mcp_approval_response`` decisions, then go on with their run once its round
        is decided (else: the approvals as they stand)."""
        desk = self._approvals
        if desk is None:
            raise OpenAIError(
                ErrorCode.INVALID_REQUEST, "approvals are not kept on this master", param="input"
            )
        verbs = RunVerbs(self._entry, desk)
        try:
            runs = {await verbs.run_of(decision["approval_id"], principal) for decision in decisions}
            if len(runs) != 1:
                raise OpenAIError(
                    ErrorCode.INVALID_REQUEST,
                    "the approvals decided together must be of one run",
                    param="input",
                )
            taken: list[Approve | Reject] = [
                Approve(approval_id=d["approval_id"], message=d["message"])
                if d["decision"] == "approve"
                else Reject(approval_id=d["approval_id"], reason=d["message"])
                for d in decisions
            ]
            return await verbs.resume(runs.pop(), taken, principal, door="responses", stream=stream)
        except RunRefused as exc:
            detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail.get("message"))
            code = ErrorCode.of(exc.code)
            raise OpenAIError(code, detail, param="input", status=code.status) from None

    # ------------------------------------------------------------------ background

    def _keep(
        self,
        run: QueryRun,
        response_id: str,
        echo: dict[str, Any],
        created: float,
        base: dict[str, Any],
        message_id: str,
    ) -> asyncio.Task[None]:
        """Store the response when its run ends, whatever its client does meanwhile."""
        task = asyncio.create_task(
            self._store_end(run, response_id, echo, created, base, message_id),
            name=f"responses: keep {response_id}",
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _store_end(
        self,
        run: QueryRun,
        response_id: str,
        echo: dict[str, Any],
        created: float,
        base: dict[str, Any],
        message_id: str,
    ) -> None:
        """Write the response as its run ended (``cancelled`` when it was stopped)."""
        try:
            try:
                answer: QueryResponse | None = await run.result()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                answer = None
            if answer is None:
                body = rwire.response_object(response_id, echo, created_at=created, status="cancelled")
                record = {**base, "response": body}
            else:
                body = finished_body(response_id, echo, created, answer, message_id)
                record = {**base, "session_id": answer.session_id, "response": body}
            await self._store.put(record)
        except SessionStoreUnavailable as exc:
            logger.warning("response %s: its end was not stored: %s", response_id, exc)
        finally:
            self._running.pop(response_id, None)

    def _stop(self, response_id: str) -> bool:
        """Cancel the run of a background response this master runs whose run has no record yet."""
        run = self._running.get(response_id)
        if run is not None:
            run.cancel("cancelled by a client (POST /v1/responses/{id}/cancel)")
        return run is not None

    # ------------------------------------------------------------------ read, cancel, delete

    async def retrieve(self, response_id: str, principal: Principal) -> Response:
        """``GET /v1/responses/{id}``: the stored response; one still in progress whose run's
        master was lost reads ``failed``."""
        scope = Scope.of(principal)
        try:
            record = await self._record(response_id, scope)
            body = record["response"]
            if body["status"] in rwire.UNFINISHED:
                body = await self._lost(record, scope) or body
        except OpenAIError as exc:
            return error_response(exc.code, exc.message, exc.status, exc.param)
        except SessionStoreUnavailable as exc:
            return error_response(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc), 503)
        return _json(body)

    async def cancel(self, response_id: str, principal: Principal) -> Response:
        """``POST /v1/responses/{id}/cancel``: a background response in progress is ``cancelled``
        and its run stopped, whichever master holds it."""
        scope = Scope.of(principal)
        try:
            record = await self._record(response_id, scope)
            body = record["response"]
            if not body.get("background"):
                raise OpenAIError(
                    ErrorCode.INVALID_REQUEST,
                    f"response {response_id!r} was not created with background: true; only a "
                    "background response can be cancelled",
                )
            if body["status"] in rwire.UNFINISHED:
                body = {**body, "status": "cancelled"}
                if await self._store.put({**record, "response": body}, cancel=True) == "cancelled":
                    await self._cancel_run(record, response_id, principal)
                else:
                    body = (await self._record(response_id, scope))["response"]
        except OpenAIError as exc:
            return error_response(exc.code, exc.message, exc.status, exc.param)
        except SessionStoreUnavailable as exc:
            return error_response(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc), 503)
        return _json(body)

    async def delete(self, response_id: str, principal: Principal) -> Response:
        """``DELETE /v1/responses/{id}``: forget a stored response (its session stays)."""
        try:
            if not await self._store.delete(response_id, Scope.of(principal)):
                raise _unknown(response_id)
        except OpenAIError as exc:
            return error_response(exc.code, exc.message, exc.status, exc.param)
        except SessionStoreUnavailable as exc:
            return error_response(ErrorCode.SESSION_STORE_UNAVAILABLE, str(exc), 503)
        return _json({"id": response_id, "object": "response.deleted", "deleted": True})

    async def _record(self, response_id: str, scope: Scope) -> dict[str, Any]:
        record = await self._store.get(response_id, scope)
        if record is None:
            raise _unknown(response_id)
        return record

    async def _lost(self, record: dict[str, Any], scope: Scope) -> dict[str, Any] | None:
        """The response ``failed`` when its run's record says the run failed (its master lost)."""
        runs: RunStore | None = self._entry.runs
        if runs is None or not record.get("run_id"):
            return None
        run = await runs.get(str(record["run_id"]), scope)
        if run is None or run.get("state") != "failed":
            return None
        reason = str(run.get("reason") or "the run failed")
        error = rwire.error_object(ErrorCode.INTERNAL_ERROR, reason)
        return {**record["response"], "status": "failed", "error": error}

    async def _cancel_run(self, record: dict[str, Any], response_id: str, principal: Principal) -> None:
        """Cancel the response's run, wherever it runs (the one cancel of every door). A run not
        recorded yet (its master is accepting its request) is waited for, briefly; the response
        says ``cancelled`` whatever happens here."""
        run_id = str(record.get("run_id") or "")
        if not run_id:
            return
        deadline = time.monotonic() + CANCEL_FIND_SECONDS
        while True:
            try:
                await self._entry.cancel(run_id, principal=principal, door="responses")
                return
            except CancelRefused as exc:
                if exc.code != ErrorCode.UNKNOWN_RUN:  # it finished meanwhile, or Redis is down
                    logger.info("response %s: its run was not cancelled: %s", response_id, exc.message)
                    return
                if self._stop(response_id):  # here, not recorded yet
                    return
                if time.monotonic() >= deadline:
                    logger.warning("response %s: its run %s was not found to cancel", response_id, run_id)
                    return
            await asyncio.sleep(0.05)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _unknown(response_id: str) -> OpenAIError:
    return OpenAIError(
        ErrorCode.NOT_FOUND, f"no response {response_id!r} (never stored, deleted, or expired)", status=404
    )


def _json(body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":"), default=str), media_type="application/json", headers=headers
    )
