"""Errors of the master.

Hierarchy::

    MasterError
    ├── QueryRejected            the query cannot be run as asked (carries a stable code)
    ├── CollaborationRejected    a collaboration cannot start as asked (carries a stable code)
    ├── RegistrationRefused      an agent may not register as asked (limit_exceeded, agent_conflict)
    ├── SessionStoreUnavailable  Redis did not answer
    ├── LLMError                 the LLM provider failed after retries, or is not configured
    ├── InvalidToolSchema        an agent's tool schemas are unusable (also a ValueError)
    ├── InvalidPlan              a plan step that cannot run (also a ValueError)
    ├── BudgetExceeded           a query's budget is used up (ends the run with an answer)
    ├── BuilderError             the agent builder cannot do what was asked (carries a stable code)
    │   ├── AgentFileRefused     a module name or handler path outside the allowed folders, or an existing file
    │   ├── AgentFileNotFound    no such agent module
    │   └── GenerationFailed     generated code still failed its checks after a retry, or was not code
    ├── AttachmentError          GET /attachments/{ref}: a RAG agent cannot have that blob
    │   ├── AttachmentAccessDenied   the call token is missing, wrong or expired
    │   └── AttachmentNotFound       no such ref in the token's session (or it expired)
    ├── SandboxError             the Kubernetes sandbox cannot do what was asked
    │   ├── SandboxDisabled      OPENAGENT_K8S_SANDBOX=0
    │   ├── SandboxUnavailable   no cluster configured or reachable, or a pool runner failed
    │   ├── SandboxRejected      a deploy request that cannot run as given (carries a stable code)
    │   └── SpawnFailed          auto mode could not deploy a saved agent, or it did not register in time
    └── ToolCallError            a tool call failed; the model sees it as the tool's result
        ├── AgentUnavailable     the agent is not connected
        ├── AgentDisconnected    the agent went away while the call was in flight
        ├── ToolTimeout          no result within TOOL_CALL_TIMEOUT
        └── ToolFailed           the agent ran the tool and reported a failure

Domain code raises these; only route code (``master/routes/``) turns them into HTTP status
codes, and the hub into WebSocket ``error`` frames. Every ``code`` is a
:class:`protocol.ErrorCode`, whose ``status`` is the HTTP status that answers it (a plain string
is accepted and checked: an unknown code is a ``ValueError`` where it is raised).
"""

from __future__ import annotations

from typing import Literal

from protocol.errors import ErrorCode

BudgetName = Literal["max_tool_calls", "max_tokens", "max_seconds"]


class MasterError(Exception):
    """Base class of the master's errors."""


class QueryRejected(MasterError):
    """A query that cannot be run as asked: a client error or a missing capability.

    ``code`` is the stable ``error_code`` of the answer (``invalid_model``, ``unknown_session``,
    ``plan_already_executed``, ``llm_timeout``, ...); its ``status`` is the answer's HTTP status.
    """

    def __init__(self, code: ErrorCode | str, message: str) -> None:
        super().__init__(message)
        self.code = ErrorCode.of(code)
        self.message = message


class CollaborationRejected(MasterError):
    """A collaboration that cannot start: the feature is off, or the agents do not fit.

    ``code`` is one of ``collaboration_disabled`` (``OPENAGENT_COLLABORATION=0``),
    ``invalid_collaboration`` (fewer than two agents, a duplicate, an empty task),
    ``unknown_agent`` (not connected over WebSocket) and ``collaboration_unsupported``
    (no ``supports_collaboration`` in the agent's metadata). The message names the value.
    """

    def __init__(self, code: ErrorCode | str, message: str) -> None:
        super().__init__(message)
        self.code = ErrorCode.of(code)
        self.message = message


class RegistrationRefused(MasterError):
    """A registration that would exceed a limit (``limit_exceeded``) or take another agent's id or
    function names (``agent_conflict``); the message names the limit or the other agent, ``field``
    the registration's field at fault (``tools`` unless said)."""

    def __init__(self, code: ErrorCode | str, message: str, field: str = "tools") -> None:
        super().__init__(message)
        self.code = ErrorCode.of(code)
        self.message = message
        self.field = field


class SessionStoreUnavailable(MasterError):
    """Redis did not answer; nothing was stored."""


class LLMError(MasterError):
    """The LLM provider could not answer (after retries)."""

    def __init__(self, message: str, *, code: ErrorCode | str = ErrorCode.LLM_ERROR) -> None:
        super().__init__(message)
        self.code = ErrorCode.of(code)


class InvalidToolSchema(MasterError, ValueError):
    """A tool's ``parameters`` is not a valid JSON Schema, or an agent declares a tool twice."""


class InvalidPlan(MasterError, ValueError):
    """A plan step that cannot run; the message names the step."""


class BudgetExceeded(MasterError):
    """Raised inside a run when a budget is used up."""

    def __init__(self, name: BudgetName, limit: float) -> None:
        super().__init__(f"the {name} budget ({limit:g}) was reached")
        self.name: BudgetName = name
        self.limit = limit


class BuilderError(MasterError):
    """The agent builder refused a request; ``code`` is stable, the message names the value."""

    def __init__(self, code: ErrorCode | str, message: str) -> None:
        super().__init__(message)
        self.code = ErrorCode.of(code)
        self.message = message


class AgentFileRefused(BuilderError):
    """``invalid_module`` (not an identifier), ``path_refused`` (a path, ``..``, a symlink, an
    absolute name, a folder outside ``agents/``, ``system_agents/``, ``sample_agents/``),
    ``file_exists`` (saving over a module without ``overwrite``) or ``too_large``."""


class AgentFileNotFound(BuilderError):
    """No such module under the allowed folders (``code`` ``not_found``)."""


class GenerationFailed(BuilderError):
    """The generator's code failed its checks twice (``checks_failed``) or was prose (``no_code``).

    ``source`` is the last code the model wrote (empty for prose) and ``checks`` the checks
    that ran on it, as dicts (``name``, ``passed``, ``detail``).
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: str,
        *,
        source: str,
        module: str,
        checks: list[dict[str, object]],
    ) -> None:
        super().__init__(code, message)
        self.source = source
        self.module = module
        self.checks = checks


class AttachmentError(MasterError):
    """A RAG agent asked for an attachment blob it cannot have."""


class AttachmentAccessDenied(AttachmentError):
    """The call token is missing, wrong or expired."""


class AttachmentNotFound(AttachmentError):
    """No attachment with that ref in the token's session (or it expired)."""


class ToolCallError(MasterError):
    """A tool call that did not produce a result; shown to the model as the tool's error."""


class AgentUnavailable(ToolCallError):
    """The agent is not connected."""


class AgentDisconnected(ToolCallError):
    """The agent disconnected while the call was in flight."""


class ToolTimeout(ToolCallError):
    """No result within the call's timeout."""


class ToolFailed(ToolCallError):
    """The agent reported ``success: false``."""


class SandboxError(MasterError):
    """The Kubernetes sandbox (``master/sandbox/``) cannot do what was asked."""


class SandboxDisabled(SandboxError):
    """The sandbox is off (``OPENAGENT_K8S_SANDBOX=0``)."""


class SandboxUnavailable(SandboxError):
    """No cluster is configured or answering, or a pool runner did not answer; the message says why."""


class SandboxRejected(SandboxError):
    """A sandbox request that cannot run as given.

    ``code`` is one of ``invalid_request`` (bad agent id, code, placement or env),
    ``unknown_module`` (no such module under ``agents/`` or ``system_agents/``),
    ``not_deployed`` (the agent has no sandbox workload), ``unknown_pool_pod`` (no ready
    pool runner Pod of that name), ``no_pool`` (no ready pool runner Pod at all) and
    ``pool_refused`` (the pool runner refused the agent, e.g. it is full).
    """

    def __init__(self, code: ErrorCode | str, message: str) -> None:
        super().__init__(message)
        self.code = ErrorCode.of(code)
        self.message = message


class SpawnFailed(SandboxError):
    """Auto mode could not deploy a saved agent, or it did not register within
    ``ORCHESTRATOR_AUTO_SPAWN_WAIT_SECONDS``; the step gets this as the tool's error."""
