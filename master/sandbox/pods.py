"""What a Pod's status means for an agent: phase, ready, restarts, and whether it is unhealthy."""

from __future__ import annotations

from typing import Any

UNHEALTHY_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "Error",
        "OOMKilled",
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "ContainerCannotRun",
    }
)
"""Container waiting/terminated reasons that mean the agent is not coming up by itself."""


def pod_ready(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all(status.get("ready") for status in statuses)


def summary(pod: dict[str, Any], container: str | None = None) -> dict[str, Any]:
    """``{pod, phase, ready, restarts, reason, unhealthy, pod_ip, node}`` of a Pod object."""
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    main = next((s for s in statuses if s.get("name") == container), statuses[0] if statuses else {})
    state = main.get("state") or {}
    reason = (state.get("waiting") or {}).get("reason") or (state.get("terminated") or {}).get("reason")
    reason = reason or status.get("reason")
    phase = status.get("phase") or "Pending"
    ready = pod_ready(pod)
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    unhealthy = (
        phase in ("Failed", "Unknown") or reason in UNHEALTHY_REASONS or (phase == "Running" and not ready)
    )
    return {
        "pod": (pod.get("metadata") or {}).get("name"),
        "phase": phase,
        "ready": ready,
        "restarts": restarts,
        "reason": reason,
        "unhealthy": unhealthy,
        "pod_ip": status.get("podIP"),
        "node": (pod.get("spec") or {}).get("nodeName"),
    }
