"""Every Redis key pattern the master uses, in one place."""

from __future__ import annotations

SESSION_PREFIX = "session:"
"""``session:{session_id}`` → JSON array of turns (TTL ``REDIS_SESSION_TTL_SECONDS``)."""


def session_key(session_id: str) -> str:
    return f"{SESSION_PREFIX}{session_id}"


SESSION_OWNER_PREFIX = "session_owner:"
"""``session_owner:{session_id}`` → the tenant that owns the session, set by the append that
creates it, for tenants other than ``default`` only (no key: ``default``, as every session made
before tenants); its TTL follows the session's."""


def session_owner_key(session_id: str) -> str:
    return f"{SESSION_OWNER_PREFIX}{session_id}"


SESSION_SUMMARIES_PREFIX = "session_summaries:"
"""``session_summaries:{session_id}`` → how many summary turns the session has, written with each
summary (a compare-and-set: one summary per span, whatever the interleaving of the queries and
masters that decided one); its TTL follows the session's."""


def session_summaries_key(session_id: str) -> str:
    return f"{SESSION_SUMMARIES_PREFIX}{session_id}"


SUMMARY_LOCK_PREFIX = "summary_lock:"
"""``summary_lock:{session_id}`` → a random token while one master summarizes the session
(TTL ``SUMMARY_LOCK_SECONDS``; deleted by its holder only)."""
SUMMARY_LOCK_SECONDS = 60


def summary_lock_key(session_id: str) -> str:
    return f"{SUMMARY_LOCK_PREFIX}{session_id}"


PLAN_CLAIM_PREFIX = "plan_claim:"
"""``plan_claim:{session_id}:{plan_id}`` → set once (SET NX) by the one execution of an approved
plan that may run it (TTL ``REDIS_SESSION_TTL_SECONDS``)."""


def plan_claim_key(session_id: str, plan_id: str) -> str:
    return f"{PLAN_CLAIM_PREFIX}{session_id}:{plan_id}"


PAUSED_RUN_PREFIX = "paused_run:"
"""``paused_run:{session_id}`` → JSON state of the session's run that waits for tool results from
its asker (TTL ``REDIS_SESSION_TTL_SECONDS``; taken with GETDEL by the one request that continues it)."""
PAUSED_CALL_PREFIX = "paused_call:"
"""``paused_call:{call_id}`` → the session whose paused run waits for that call's result (same TTL):
how a stateless asker that sends only the results finds its run."""


def paused_run_key(session_id: str) -> str:
    return f"{PAUSED_RUN_PREFIX}{session_id}"


def paused_call_key(call_id: str) -> str:
    return f"{PAUSED_CALL_PREFIX}{call_id}"


APPROVAL_PREFIX = "approval:"
"""``approval:{approval_id}`` → JSON of a tool call waiting for a person (:class:`protocol.Approval`
less its decision; TTL twice ``OPENAGENT_APPROVAL_TTL_SECONDS``, so an expired one still answers)."""
APPROVAL_DECISION_PREFIX = "approval_decision:"
"""``approval_decision:{approval_id}`` → JSON of its decision, set once (SET NX: one decider wins)."""
SESSION_APPROVALS_PREFIX = "session_approvals:"
"""``session_approvals:{session_id}`` → set of the approval ids of the session's paused runs."""
APPROVALS_EXPIRING_KEY = "approvals:expiring"
"""ZSET of the pending approval ids by ``expires_at``: ``GET /approvals`` without a session lists
it, and the expiry sweep reads those whose time has passed (an id leaves it once decided or
expired, or when a listing finds its record gone)."""
SESSION_APPROVED_TOOLS_PREFIX = "session_approved_tools:"
"""``session_approved_tools:{session_id}`` → SET of the tools (``<agent_id>__<tool>``) a person
approved for the rest of the session (``"remember": "session"``; TTL ``REDIS_SESSION_TTL_SECONDS``,
refreshed when read)."""


def session_approved_tools_key(session_id: str) -> str:
    return f"{SESSION_APPROVED_TOOLS_PREFIX}{session_id}"


def approval_key(approval_id: str) -> str:
    return f"{APPROVAL_PREFIX}{approval_id}"


def approval_decision_key(approval_id: str) -> str:
    return f"{APPROVAL_DECISION_PREFIX}{approval_id}"


def session_approvals_key(session_id: str) -> str:
    return f"{SESSION_APPROVALS_PREFIX}{session_id}"


RUN_PREFIX = "run:"
"""``run:{run_id}`` → JSON of a run's record (:mod:`master.runs.store`): ``state``, ``holder``
(a master id), ``lease`` (the holder's lease token), ``session_id``, ``tenant``, ``query_id``,
``reason``, ``stopped_by``, ``created_at``, ``updated_at``, and the tool calls ``completed``,
``in_flight``, ``unknown``; TTL ``REDIS_SESSION_TTL_SECONDS``. One string: a run's end is one ``SET``."""
RUN_CHECKPOINT_PREFIX = "run_checkpoint:"
"""``run_checkpoint:{run_id}`` → JSON of what a halted or lost run resumes from (its messages,
steps, budget spent, the calls it still owes); same TTL as the record."""
RUNS_RUNNING_KEY = "runs:running"
"""SET of the ids of runs recorded ``running``: what the sweep checks for a lost holder."""
RUNS_CANCEL_CHANNEL = "runs:cancel"
"""Pub/sub channel of the ids of runs asked to stop (``DELETE /runs/{run_id}`` on any master): the
master holding the run stops it."""
RUN_LEASE_PREFIX = "run_lease:"
"""``run_lease:{master_id}`` → the token of the master's current life (TTL
``OPENAGENT_RUN_LEASE_SECONDS``, renewed every third of it): a running run whose holder's lease
is gone, or holds another token, was lost with its master."""


def run_key(run_id: str) -> str:
    return f"{RUN_PREFIX}{run_id}"


def run_checkpoint_key(run_id: str) -> str:
    return f"{RUN_CHECKPOINT_PREFIX}{run_id}"


def run_lease_key(master_id: str) -> str:
    return f"{RUN_LEASE_PREFIX}{master_id}"


AGENT_PREFIX = "agent:"
"""``agent:{agent_id}`` → JSON record of an HTTP invocation agent (TTL ``REDIS_AGENT_TTL_SECONDS``)."""

AGENT_INDEX = "agents:invocation"
"""SET of the ids of registered invocation agents (members whose record expired are pruned on load)."""

AGENT_INDEX_VERSION = "agents:invocation:version"
"""Counter bumped with every registration and removal of an invocation agent (in the same
transaction): a master whose last load saw another value re-reads the records (several masters)."""


def agent_key(agent_id: str) -> str:
    return f"{AGENT_PREFIX}{agent_id}"


AGENT_OWNER_PREFIX = "agent_owner:"
"""``agent_owner:{agent_id}`` → JSON of who holds the id: the tenant it serves (``null``: shared
with every tenant by an administrator) and the role, ``action`` or ``query``
(:class:`master.agents.identity.AgentIds`; TTL ``REDIS_AGENT_TTL_SECONDS``, renewed at each
registration and when an action agent's WebSocket disconnects)."""


def agent_owner_key(agent_id: str) -> str:
    return f"{AGENT_OWNER_PREFIX}{agent_id}"


CALL_PREFIX = "call:"
"""``call:{call_id}`` → HASH of an HTTP invocation call the master sent: ``state`` (``pending``, then
``stored`` by the query's append or ``recorded`` by a late callback), ``token`` (SHA-256 of the
call's token), ``master``, ``session``, ``query``, ``agent``, ``tool``, ``args`` (TTL the call's
timeout plus a minute). Its callback may arrive at any master, or after a restart
(:mod:`master.agents.call_records`)."""


def call_record_key(call_id: str) -> str:
    return f"{CALL_PREFIX}{call_id}"


AGENT_QUARANTINE_PREFIX = "agent_quarantine:"
"""``agent_quarantine:{agent_id}`` → a stored record the master could not use, moved aside at
load time (keeps the ``agent:`` record's TTL; nothing reads it back)."""


def quarantined_agent_key(agent_id: str) -> str:
    return f"{AGENT_QUARANTINE_PREFIX}{agent_id}"


COLLAB_PREFIX = "collab:"
"""``collab:{collab_session_id}`` → one JSON object: the session's metadata, then ``entries``
(handshake, message, end), always the last key so that an append is a string splice
(TTL ``OPENAGENT_COLLAB_SESSION_TTL``)."""

COLLAB_BY_PARENT_PREFIX = "collab:by_parent:"
"""``collab:by_parent:{parent_session_id}`` → SET of the collaborations started from that
orchestrator session (TTL ``OPENAGENT_COLLAB_SESSION_TTL``, refreshed with each new member)."""


def collab_key(collab_session_id: str) -> str:
    return f"{COLLAB_PREFIX}{collab_session_id}"


def collab_by_parent_key(parent_session_id: str) -> str:
    return f"{COLLAB_BY_PARENT_PREFIX}{parent_session_id}"


ATTACHMENTS_PREFIX = "attachments:"
"""``attachments:{session_id}:files`` → HASH ref → JSON metadata (filename, mime_type, size,
sha256, attached_at); ``attachments:{session_id}:blob:{sha256}`` → the bytes, stored once per
content; ``attachments:{session_id}:rag`` → HASH ref → JSON indexing state reported by the
indexer. All three follow the session's TTL (``REDIS_SESSION_TTL_SECONDS``)."""

ATTACHMENT_TOKEN_PREFIX = "attachments:token:"
"""``attachments:token:{token}`` → session_id: the RAG agents' key to that session's blobs,
issued per query and deleted when it ends (TTL: the query's time budget)."""


def attachment_files_key(session_id: str) -> str:
    return f"{ATTACHMENTS_PREFIX}{session_id}:files"


def attachment_blob_key(session_id: str, sha256: str) -> str:
    return f"{ATTACHMENTS_PREFIX}{session_id}:blob:{sha256}"


def attachment_rag_key(session_id: str) -> str:
    return f"{ATTACHMENTS_PREFIX}{session_id}:rag"


def attachment_token_key(token: str) -> str:
    return f"{ATTACHMENT_TOKEN_PREFIX}{token}"


SANDBOX_PLACEMENT_PREFIX = "sandbox:placement:"
"""``sandbox:placement:{agent_id}`` → JSON placement of a sandboxed agent: ``new_pod`` (Pod and
ConfigMap) or ``pool`` (pool runner Pod) (TTL ``OPENAGENT_K8S_SANDBOX_RUNTIME_TTL``)."""

SANDBOX_INDEX = "sandbox:placements"
"""SET of the ids of sandboxed agents (members whose placement expired are pruned on read;
TTL ``OPENAGENT_K8S_SANDBOX_RUNTIME_TTL``, refreshed with each deploy)."""


def sandbox_placement_key(agent_id: str) -> str:
    return f"{SANDBOX_PLACEMENT_PREFIX}{agent_id}"


CLUSTER_PREFIX = "cluster:"
"""Keys of several masters sharing this Redis (``OPENAGENT_CLUSTER=1``, see docs/scale-out.md)."""

CLUSTER_AGENTS = "cluster:agents"
"""HASH ``agent_id`` → JSON ``{master_id, role, metadata, tools, connected_at}`` of every WebSocket
agent connected to some master; an entry counts only while its master's lease lives."""

CLUSTER_AGENTS_VERSION = "cluster:agents:version"
"""Counter bumped on every change of :data:`CLUSTER_AGENTS`, so masters re-read it only when it changed."""


def master_lease_key(master_id: str) -> str:
    """``cluster:master:{master_id}`` → JSON ``{base_url, started}`` (TTL ``OPENAGENT_MASTER_LEASE_SECONDS``,
    refreshed by the master every third of it)."""
    return f"{CLUSTER_PREFIX}master:{master_id}"


def master_inbox_key(master_id: str) -> str:
    """``cluster:inbox:{master_id}`` → STREAM of the calls and results other masters send this one
    (trimmed to about 10,000 entries; expires with the master's lease, times 3)."""
    return f"{CLUSTER_PREFIX}inbox:{master_id}"


A2A_PREFIX = "a2a:"
"""Keys of the A2A door (:mod:`master.runs.a2a_tasks`), all with the TTL ``REDIS_SESSION_TTL_SECONDS``."""

A2A_CANCELED_CHANNEL = "a2a:canceled"
"""Pub/sub channel: the id of each A2A task some master marked ``CANCELED`` (every master listens)."""


def a2a_task_key(task_id: str) -> str:
    """``a2a:task:{task_id}`` → HASH ``task`` (binary protobuf), ``version`` (counter), ``state``
    (the state's number), ``scope`` (agent id, ``""`` for the hub's endpoint), ``updated`` (ms)."""
    return f"{A2A_PREFIX}task:{task_id}"


def a2a_index_key(scope: str) -> str:
    """``a2a:tasks:{scope}`` → ZSET of an endpoint's task ids by last update (``ListTasks``)."""
    return f"{A2A_PREFIX}tasks:{scope}"


def a2a_context_key(context_id: str, tenant: str = "default") -> str:
    """``a2a:context:{context_id}`` → the hub ``session_id`` that holds the A2A context's turns;
    ``a2a:context:{len(tenant)}:{tenant}:{context_id}`` for a tenant other than ``default`` (each
    tenant has its own context ids: another tenant's ``contextId`` starts a new session)."""
    if tenant != "default":
        return f"{A2A_PREFIX}context:{len(tenant)}:{tenant}:{context_id}"
    return f"{A2A_PREFIX}context:{context_id}"


def a2a_waiting_key(session_id: str) -> str:
    """``a2a:waiting:{session_id}`` → the id of the A2A task that is ``INPUT_REQUIRED`` while the
    session's run waits for approvals: the door moves it on when the run resumes, wherever it does."""
    return f"{A2A_PREFIX}waiting:{session_id}"


def a2a_events_channel(task_id: str) -> str:
    """Pub/sub channel ``a2a:events:{task_id}``: ``<version>:<task>`` after each write of the task."""
    return f"{A2A_PREFIX}events:{task_id}"


API_KEYS = "api_keys"
"""HASH: the SHA-256 of each stored API key → its JSON record (id, name, role, tenant,
``agent_ids``, created); never the key itself (:mod:`master.access.keys`). No TTL."""
API_KEYS_LAST_USED = "api_keys:last_used"
"""HASH: key id → when a master last saw it used (seconds since the epoch, written in batches)."""


YAML_AGENTS_PREFIX = "yaml_agents:"
"""Agents a master's YAML runner started (:mod:`master.builder.yaml_records`), started again
when that master restarts; no TTL: an entry goes when the agent is stopped."""


def yaml_agents_key(master_name: str) -> str:
    """``yaml_agents:{master_name}`` → HASH agent id → JSON ``{"spec", "tenant", "port"}``
    (``master_name``: ``OPENAGENT_MASTER_ID``, ``local`` when unset)."""
    return f"{YAML_AGENTS_PREFIX}{master_name}"


OPENAI_RESPONSE_PREFIX = "openai_response:"
"""``openai_response:{response_id}`` → JSON of a stored Responses API answer (``POST /v1/responses``
with ``store``): the response object as ``GET /v1/responses/{response_id}`` gives it, with its
tenant, run, session and the master that holds a background one (TTL ``REDIS_SESSION_TTL_SECONDS``)."""


def openai_response_key(response_id: str) -> str:
    return f"{OPENAI_RESPONSE_PREFIX}{response_id}"
