"""The stable error codes of OpenAgent, each with its HTTP status and meaning.

One enumeration, :class:`ErrorCode`, names every refusal the master gives: the ``code`` of a
WebSocket :class:`~protocol.messages.ErrorMessage`, the ``error_code`` of a failed
:class:`~protocol.queries.QueryResponse`, and the ``error_code`` of every HTTP error body
(:class:`ErrorBody`). Each code carries the HTTP status that answers it (:attr:`ErrorCode.status`,
also :data:`ERROR_STATUS`) and a one-sentence meaning (:attr:`ErrorCode.meaning`) that the error
table of the documentation shows.

The values are plain strings on the wire (a :class:`~enum.StrEnum`): ``ErrorCode.UNKNOWN_SESSION
== "unknown_session"``, and ``ErrorCode.of("unknown_session")`` is the member.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, cast

from pydantic import BaseModel, ConfigDict

__all__ = ["ERROR_STATUS", "ErrorBody", "ErrorCode"]


class ErrorCode(StrEnum):
    """A stable, machine-readable error code; the message beside it names the offending value."""

    _value_: str
    status: int
    """The HTTP status that answers this code."""
    meaning: str
    """What the code means, in one sentence."""

    def __new__(cls, value: str, status: int, meaning: str) -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.status = status
        member.meaning = meaning
        return member

    @classmethod
    def of(cls, value: ErrorCode | str) -> ErrorCode:
        """The code named ``value``; ``ValueError`` for a string that is no code."""
        member = cls._value2member_map_.get(value)
        if member is None:
            raise ValueError(f"{value!r} is not an ErrorCode")
        return cast(ErrorCode, member)

    # ----------------------------------------------------------------- requests and auth
    UNAUTHORIZED = "unauthorized", 401, "The API key (or a call's token) is missing, wrong or expired."
    FORBIDDEN = (
        "forbidden",
        403,
        "The key's role does not allow this route or message; the message names the role it needs.",
    )
    INVALID_BODY = "invalid_body", 400, "The request body could not be read (not JSON, or nested too deeply)."
    BODY_TOO_LARGE = "body_too_large", 413, "The request body is over OPENAGENT_HTTP_MAX_BODY_BYTES."
    VALIDATION_ERROR = (
        "validation_error",
        422,
        "The request does not fit the schema; `detail` lists each field.",
    )
    NOT_FOUND = "not_found", 404, "No such path, module or resource."
    METHOD_NOT_ALLOWED = (
        "method_not_allowed",
        405,
        "The path does not take this method; `Allow` lists those it does.",
    )
    INVALID_REQUEST = "invalid_request", 400, "The request is well-formed but cannot be carried out as given."
    FEATURE_DISABLED = (
        "feature_disabled",
        403,
        "The feature is switched off by a setting, named in the message.",
    )
    INTERNAL_ERROR = "internal_error", 500, "The master failed unexpectedly; its log has the details."
    NOT_IMPLEMENTED = "not_implemented", 501, "The requested feature is not implemented."
    # ----------------------------------------------------------------- WebSocket protocol
    INVALID_MESSAGE = (
        "invalid_message",
        400,
        "A WebSocket frame is not JSON or does not fit its message's schema.",
    )
    UNKNOWN_TYPE = "unknown_type", 400, "A WebSocket frame's `type` is not a message of the protocol."
    NOT_REGISTERED = "not_registered", 400, "An agent sent a frame before its `register`."
    ALREADY_REGISTERED = "already_registered", 409, "The connection sent `register` a second time."
    MESSAGE_TOO_LARGE = "message_too_large", 413, "A WebSocket frame is over the master's size limit."
    AGENT_REPLACED = (
        "agent_replaced",
        409,
        "A newer connection registered the same agent id; this one is closed.",
    )
    LIMIT_EXCEEDED = (
        "limit_exceeded",
        422,
        "A registration would exceed a limit (agents, tools or schema size).",
    )
    AGENT_CONFLICT = "agent_conflict", 409, "The agent id or a tool's function name belongs to another agent."
    UNKNOWN_AGENT = (
        "unknown_agent",
        400,
        "The request names an agent the hub does not know (or one not connected where it must be).",
    )
    UNKNOWN_TOOL = "unknown_tool", 404, "The agent has no tool of that name (a direct tool call)."
    INVALID_ARGUMENTS = (
        "invalid_arguments",
        400,
        "A direct tool call's arguments do not fit the tool's schema; each problem names its field.",
    )
    # ----------------------------------------------------------------- queries
    INVALID_QUERY = "invalid_query", 400, "The query cannot run as asked (e.g. a plan without its session)."
    INVALID_MODEL = "invalid_model", 400, "The model is not in the master's list of allowed models."
    UNKNOWN_MODEL = (
        "unknown_model",
        404,
        "The OpenAI-compatible API serves no model by that name (`GET /v1/models` lists them).",
    )
    INVALID_PLAN = "invalid_plan", 400, "A step of the plan to execute cannot run."
    INVALID_ATTACHMENT = (
        "invalid_attachment",
        400,
        "An attachment's base64 does not decode, or its type contradicts its content.",
    )
    TOO_MANY_ATTACHMENTS = (
        "too_many_attachments",
        413,
        "The query has more attachments than RAG_MAX_ATTACHMENTS.",
    )
    ATTACHMENT_TOO_LARGE = "attachment_too_large", 413, "An attachment is over RAG_MAX_ATTACHMENT_BYTES."
    UNKNOWN_SESSION = "unknown_session", 404, "The session id is unknown or expired."
    NOT_IN_SESSION = "not_in_session", 403, "The agent is not a member of that collaboration session."
    UNKNOWN_PLAN = "unknown_plan", 404, "The session holds no plan with that id."
    PLAN_ALREADY_EXECUTED = "plan_already_executed", 409, "The plan was already executed."
    UNKNOWN_APPROVAL = "unknown_approval", 404, "No approval with that id (never made, or gone with its TTL)."
    APPROVAL_DECIDED = (
        "approval_decided",
        409,
        "The approval was already decided (the body names the decision that won) or has expired.",
    )
    UNKNOWN_RUN = "unknown_run", 404, "No run with that id (never started, or gone with its TTL)."
    RUN_NOT_RESUMABLE = (
        "run_not_resumable",
        409,
        "The run is not in a state that resumes (the message names its state).",
    )
    RUN_NOT_RUNNING = (
        "run_not_running",
        409,
        "The run finished (completed or failed): only a running or paused run is cancelled (the message names its state).",
    )
    RUN_CANCELLED = (
        "run_cancelled",
        409,
        "The run was cancelled (`DELETE /runs/{run_id}`, or a door's cancel) before it answered.",
    )
    BUDGET_NOT_LARGER = (
        "budget_not_larger",
        422,
        "A resume's budget must be larger than the one that stopped the run (the message names it).",
    )
    TOO_MANY_QUERIES = "too_many_queries", 429, "Too many queries are in flight on this master; retry later."
    DRAINING = "draining", 503, "The master is stopping; retry on another master (see `Retry-After`)."
    SESSION_STORE_UNAVAILABLE = "session_store_unavailable", 503, "Redis did not answer; nothing was stored."
    # ----------------------------------------------------------------- the LLM provider
    LLM_NOT_CONFIGURED = "llm_not_configured", 503, "No LLM provider is configured on the master."
    LLM_ERROR = "llm_error", 502, "The LLM provider answered with an error."
    LLM_BAD_RESPONSE = "llm_bad_response", 502, "The LLM provider's answer could not be read."
    LLM_TIMEOUT = "llm_timeout", 502, "The LLM provider did not answer in time, after retries."
    LLM_UNAVAILABLE = "llm_unavailable", 502, "The LLM provider could not be reached."
    LLM_AUTH_FAILED = "llm_auth_failed", 502, "The LLM provider rejected the master's API key."
    LLM_RATE_LIMITED = (
        "llm_rate_limited",
        502,
        "The LLM provider kept refusing with a rate limit, after retries.",
    )
    LLM_MODEL_NOT_FOUND = "llm_model_not_found", 502, "The LLM provider does not know the model."
    LLM_BUSY = (
        "llm_busy",
        503,
        "The LLM server stayed busy (HTTP 503) for the whole request timeout; retry later.",
    )
    LLM_EMPTY_ANSWER = "llm_empty_answer", 502, "The LLM server ended its answer without sending anything."
    LLM_CONTEXT_OVERFLOW = (
        "llm_context_overflow",
        502,
        "The LLM server refused a prompt longer than the model's context window.",
    )
    LLM_INVALID_PLAN = "llm_invalid_plan", 502, "The model proposed no usable plan."
    # ----------------------------------------------------------------- invocation calls
    UNKNOWN_CALL = "unknown_call", 404, "No call with that id is in flight, or the token is not its own."
    CALL_FINISHED = (
        "call_finished",
        410,
        "The call already finished (timed out or failed); the result was dropped.",
    )
    ALREADY_RECORDED = (
        "already_recorded",
        409,
        "The call's result was already recorded (a repeated callback).",
    )
    CALL_HOLDER_UNAVAILABLE = (
        "call_holder_unavailable",
        503,
        "The master holding the call did not answer; retry.",
    )
    UNKNOWN_ATTACHMENT = (
        "unknown_attachment",
        404,
        "No such attachment in the token's session (or it expired).",
    )
    # ----------------------------------------------------------------- collaboration
    COLLABORATION_DISABLED = (
        "collaboration_disabled",
        403,
        "Collaboration is switched off (OPENAGENT_COLLABORATION=0).",
    )
    INVALID_COLLABORATION = (
        "invalid_collaboration",
        400,
        "Fewer than two agents, an agent listed twice, or an empty task.",
    )
    COLLABORATION_UNSUPPORTED = (
        "collaboration_unsupported",
        409,
        "An agent does not declare `supports_collaboration`.",
    )
    UNKNOWN_COLLABORATION = "unknown_collaboration", 404, "The collaboration session is unknown or expired."
    # ----------------------------------------------------------------- agent builder and workspaces
    UNSUPPORTED_AGENT_TYPE = "unsupported_agent_type", 422, "The generator writes action agents only."
    CHECKS_FAILED = "checks_failed", 422, "The generated code still failed its checks after one retry."
    NO_CODE = "no_code", 422, "The model answered with prose instead of code."
    INVALID_MODULE = "invalid_module", 400, "The module name is not a Python identifier."
    PATH_REFUSED = "path_refused", 400, "The module or handler path is outside the agent folders."
    FILE_EXISTS = "file_exists", 400, "The module exists already; send `overwrite` to replace it."
    TOO_LARGE = "too_large", 413, "The source or workspace YAML is over its size cap."
    INVALID = "invalid", 400, "The workspace YAML does not fit its schema; each problem names its line."
    YAML_SYNTAX = "yaml_syntax", 400, "The workspace is not YAML, or holds more than one document."
    YAML_BOMB = "yaml_bomb", 400, "The workspace YAML's aliases expand past the node cap."
    TOO_DEEP = "too_deep", 400, "The workspace YAML is nested too deeply."
    # ----------------------------------------------------------------- Kubernetes sandbox
    SANDBOX_UNAVAILABLE = (
        "sandbox_unavailable",
        503,
        "No cluster is configured or answering, or a pool runner did not answer.",
    )
    UNKNOWN_MODULE = "unknown_module", 404, "No such module under the agent folders."
    NOT_DEPLOYED = "not_deployed", 404, "The agent has no sandbox workload."
    UNKNOWN_POOL_POD = "unknown_pool_pod", 404, "No ready pool runner Pod has that name."
    NO_POOL = "no_pool", 409, "No pool runner Pod is ready."
    POOL_REFUSED = "pool_refused", 409, "The pool runner refused the agent (e.g. it is full)."


ERROR_STATUS: dict[ErrorCode, int] = {code: code.status for code in ErrorCode}
"""The HTTP status of each code."""


class ErrorBody(BaseModel):
    """Every HTTP error answer: ``detail`` as FastAPI gives it, and a stable ``error_code``.

    ``detail`` is a message naming the offending value, FastAPI's list of validation errors
    (422), or an object with more (``code``, ``message`` and the problems or checks).
    """

    model_config = ConfigDict(use_attribute_docstrings=True)

    detail: str | list[dict[str, Any]] | dict[str, Any]
    """What went wrong: a message, a list of validation errors, or an object with details."""
    error_code: ErrorCode
    """The stable code of the refusal."""
