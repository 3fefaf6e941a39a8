"""The audit trail: one structured log line and one count per administrative action.

:func:`audit` logs on ``master.audit`` (a JSON line with ``OPENAGENT_LOG_FORMAT=json``) the
action, the key's id and name (never a secret) and what was acted on (with the JSON format,
also as the line's ``audit`` object), and counts it in
``openagent_audit_events_total{action}``.
"""

from __future__ import annotations

import logging
from enum import StrEnum

from master.auth import Principal
from master.observability.metrics import Metrics

logger = logging.getLogger("master.audit")


class AuditAction(StrEnum):
    """The administrative actions audited (the ``action`` label)."""

    KEY_CREATED = "key_created"
    KEY_REVOKED = "key_revoked"
    MODULE_SAVED = "module_saved"
    YAML_AGENTS_STARTED = "yaml_agents_started"
    YAML_AGENTS_STOPPED = "yaml_agents_stopped"
    WORKSPACE_RESTORED = "workspace_restored"
    POD_DEPLOYED = "pod_deployed"
    POD_STOPPED = "pod_stopped"


def audit(metrics: Metrics, principal: Principal, action: AuditAction, **target: object) -> None:
    """Log and count ``action`` by ``principal`` on ``target`` (ids and names, no secrets)."""
    metrics.audit_events.labels(action.value).inc()
    details = " ".join(f"{name}={value!r}" for name, value in sorted(target.items()))
    logger.info(
        "audit %s by key %s (%s, role %s, tenant %s) %s",
        action.value,
        principal.key_id,
        principal.name,
        principal.role.value,
        principal.tenant,
        details,
        extra={
            "audit": {
                "action": action.value,
                "key_id": principal.key_id,
                "key_name": principal.name,
                "role": principal.role.value,
                "tenant": principal.tenant,
                **target,
            }
        },
    )
