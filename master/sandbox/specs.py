"""Kubernetes objects of a ``new_pod`` agent: its code ConfigMap and its Pod, as plain dicts.

Secure by default: the Pod runs as a non-root numeric user with a read-only root filesystem
(a writable ``emptyDir`` at ``/tmp`` only), every capability dropped, no privilege escalation,
seccomp ``RuntimeDefault``, no service-account token and no service links; CPU and memory
requests and limits come from the settings, and so does an optional ``runtimeClassName``
(e.g. gVisor). The agent's key for the master is its own (role ``agent``, its id and its
starter's tenant only, made by :class:`~master.sandbox.service.Sandbox` at deploy and revoked at
stop), in a Secret of its own (:func:`secret`) that the Pod refers to: never the master's key,
and never in the Pod spec itself.

Labels tie every object to its agent: ``openagent.io/agent`` is a DNS-safe key derived from the
agent id (:func:`agent_key`), and the id itself is the annotation ``openagent.io/agent-id``.
``deploy/k8s/network-policy.yaml`` selects the Pods by ``openagent.io/role: agent``.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import string
from collections.abc import Mapping
from typing import Any

from master.sandbox.code import AgentCode
from master.settings import Settings

ROLE_LABEL = "openagent.io/role"
AGENT_LABEL = "openagent.io/agent"
AGENT_ID_ANNOTATION = "openagent.io/agent-id"
CODE_ANNOTATION = "openagent.io/code"
AGENT_ROLE = "agent"
AGENT_POD_SELECTOR = f"{ROLE_LABEL}={AGENT_ROLE}"

API_KEY_ENTRY = "OPENAGENT_API_KEY"
"""The entry of an agent's Secret (:func:`secret`) that holds its key for the master."""
AGENT_UID = 10001
"""The images' numeric non-root user (deploy/docker/agent-runtime.Dockerfile)."""
CODE_DIR = "/opt/openagent/agent"
CODE_FILE = "agent.py"
AGENT_CONTAINER = "agent"

INDEXER_AGENT_ID = "document-indexer-agent"
INDEXER_MODULE = "system_agents.document_indexer_agent"
REDIS_SIDECAR_IMAGE = "redis:7-alpine"
REDIS_SIDECAR_URL = "redis://127.0.0.1:6379"

RESERVED_ENV = frozenset({"MASTER_WS", "OPENAGENT_API_KEY", "OPENAGENT_AGENT_ID", "HOME", "PYTHONPATH"})
"""Variables the sandbox sets itself; a start request may not override them."""

_DROP_ALL = {"drop": ["ALL"]}


def agent_key(agent_id: str) -> str:
    """A label value and name part for ``agent_id``: a slug plus a hash, at most 49 characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", agent_id.lower()).strip("-")[:40].strip("-") or "agent"
    return f"{slug}-{hashlib.sha256(agent_id.encode()).hexdigest()[:8]}"


def agent_selector(agent_id: str) -> str:
    return f"{AGENT_LABEL}={agent_key(agent_id)}"


def pod_name(agent_id: str) -> str:
    """``oa-<key>-<5 random>``: a fresh name per deploy, so a replacement never waits for the
    old Pod's termination to free its name."""
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
    return f"oa-{agent_key(agent_id)}-{suffix}"


def is_indexer(agent_id: str, code: AgentCode) -> bool:
    """The document indexer gets a Redis sidecar (the spec's RAG notes)."""
    return agent_id == INDEXER_AGENT_ID or code.module == INDEXER_MODULE


def labels(agent_id: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "openagent-agent",
        "app.kubernetes.io/part-of": "openagent",
        "app.kubernetes.io/managed-by": "openagent-master",
        ROLE_LABEL: AGENT_ROLE,
        AGENT_LABEL: agent_key(agent_id),
    }


def config_map(name: str, agent_id: str, code: AgentCode, namespace: str) -> dict[str, Any]:
    """The agent's code, mounted read-only into its Pod at ``/opt/openagent/agent/agent.py``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels(agent_id),
            "annotations": {AGENT_ID_ANNOTATION: agent_id, CODE_ANNOTATION: code.origin},
        },
        "immutable": True,
        "data": {CODE_FILE: code.source},
    }


def secret(name: str, agent_id: str, api_key: str, namespace: str) -> dict[str, Any]:
    """The agent's own key for the master, referred to by its Pod (``stringData``: the API server
    encodes it)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels(agent_id),
            "annotations": {AGENT_ID_ANNOTATION: agent_id},
        },
        "type": "Opaque",
        "immutable": True,
        "stringData": {API_KEY_ENTRY: api_key},
    }


def _restricted_container_context(uid: int, gid: int) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": gid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": _DROP_ALL,
    }


def _redis_sidecar() -> dict[str, Any]:
    return {
        "name": "redis",
        "image": REDIS_SIDECAR_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        # Only the agent in this Pod talks to it; nothing is persisted.
        "args": ["--bind", "127.0.0.1", "--port", "6379", "--save", "", "--appendonly", "no"],
        "resources": {
            "requests": {"cpu": "25m", "memory": "64Mi"},
            "limits": {"cpu": "250m", "memory": "256Mi"},
        },
        # The official image's `redis` account (uid 999, gid 1000), as in deploy/k8s/redis.yaml.
        "securityContext": _restricted_container_context(999, 1000),
        "volumeMounts": [{"name": "redis-data", "mountPath": "/data"}],
    }


def pod(
    settings: Settings,
    *,
    name: str,
    agent_id: str,
    code: AgentCode,
    master_ws: str,
    env: Mapping[str, str],
) -> dict[str, Any]:
    """The agent's Pod; ``env`` are the request's extra variables (none of :data:`RESERVED_ENV`).

    Its key is the entry :data:`API_KEY_ENTRY` of the Secret ``name`` (:func:`secret`)."""
    variables: list[dict[str, Any]] = [
        {"name": "MASTER_WS", "value": master_ws},
        {"name": "OPENAGENT_AGENT_ID", "value": agent_id},
        {"name": "HOME", "value": "/tmp"},
        {
            "name": "OPENAGENT_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": name, "key": API_KEY_ENTRY}},
        },
    ]
    containers: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = [
        {"name": "code", "configMap": {"name": name, "defaultMode": 0o444}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
    ]
    extra = dict(env)
    if is_indexer(agent_id, code):
        if settings.openagent_k8s_indexer_redis_sidecar:
            extra["REDIS_URL"] = REDIS_SIDECAR_URL
            containers.append(_redis_sidecar())
            volumes.append({"name": "redis-data", "emptyDir": {"sizeLimit": "256Mi"}})
        elif settings.openagent_k8s_indexer_redis_url:
            # Never the master's own REDIS_URL: it holds the password of the master's Redis.
            extra.setdefault("REDIS_URL", settings.openagent_k8s_indexer_redis_url)
    variables += [{"name": key, "value": value} for key, value in sorted(extra.items())]
    agent = {
        "name": AGENT_CONTAINER,
        "image": settings.openagent_k8s_agent_image,
        "imagePullPolicy": settings.openagent_k8s_agent_image_pull_policy,
        # The runtime image's entrypoint is `python -m`; the code is a mounted file instead.
        "command": ["python", f"{CODE_DIR}/{CODE_FILE}"],
        "workingDir": "/tmp",
        "env": variables,
        "resources": {
            "requests": {
                "cpu": settings.openagent_k8s_agent_cpu_request,
                "memory": settings.openagent_k8s_agent_memory_request,
            },
            "limits": {
                "cpu": settings.openagent_k8s_agent_cpu_limit,
                "memory": settings.openagent_k8s_agent_memory_limit,
            },
        },
        "securityContext": _restricted_container_context(AGENT_UID, AGENT_UID),
        "volumeMounts": [
            {"name": "code", "mountPath": CODE_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 10,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": AGENT_UID,
            "runAsGroup": AGENT_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [agent, *containers],
        "volumes": volumes,
    }
    if settings.openagent_k8s_runtime_class:
        spec["runtimeClassName"] = settings.openagent_k8s_runtime_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": settings.openagent_k8s_namespace,
            "labels": labels(agent_id),
            "annotations": {AGENT_ID_ANNOTATION: agent_id, CODE_ANNOTATION: code.origin},
        },
        "spec": spec,
    }
