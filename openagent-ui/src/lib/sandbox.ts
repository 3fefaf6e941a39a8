/**
 * The Kubernetes sandbox as the page shows it: the `sandbox` field of a `GET /agents` row
 * (placement, Pod, phase, ready, restarts; unhealthy rows carry `log_tail`) as a short badge,
 * and which sidebar agents can be deployed. Pure functions only.
 */

import type { SandboxField, SandboxLogs } from "../api/types";

/** The `sandbox` field of a `GET /agents` row, and `GET /internal/sandbox-agent/logs` (generated). */
export type { SandboxField, SandboxLogs };

export type SandboxTone = "ok" | "pending" | "error";

export interface SandboxBadge {
  text: string;
  tone: SandboxTone;
  /** The longer story for a tooltip: Pod, placement, the cluster's error. */
  title: string;
}

/** The field of a row, or `null` when the row has none (sandbox off, or not deployed by it). */
export function sandboxFieldOf(value: unknown): SandboxField | null {
  if (!value || typeof value !== "object" || Array.isArray(value)) return null;
  const field = value as SandboxField;
  return typeof field.placement === "string" ? field : null;
}

function restartsText(restarts: number | null | undefined): string | null {
  if (restarts === null || restarts === undefined) return null;
  return `${restarts} restart${restarts === 1 ? "" : "s"}`;
}

/**
 * "Pod Running · ready · 0 restarts", "CrashLoopBackOff · 5 restarts", "Pod Pending · not ready",
 * "Pod missing", "Cluster unreachable"; the tone colours it.
 */
export function sandboxBadge(field: SandboxField): SandboxBadge {
  const where = field.placement === "pool" ? "Pool" : "Pod";
  const titleParts = [
    field.placement === "pool" ? `pool runner Pod ${field.pod ?? "?"}` : `Pod ${field.pod ?? "?"}`,
    field.namespace ? `namespace ${field.namespace}` : null,
    field.code ?? null,
    field.error ? `error: ${field.error}` : null,
  ].filter(Boolean);
  const title = titleParts.join(" · ");
  if (field.error) return { text: "Cluster unreachable", tone: "error", title };
  const phase = field.phase ?? "Unknown";
  if (phase === "Missing") return { text: `${where} missing`, tone: "error", title };
  const restarts = restartsText(field.restarts);
  const tone: SandboxTone = field.unhealthy ? "error" : field.ready ? "ok" : "pending";
  // An unhealthy container's reason says more than its phase ("Running" while crash-looping).
  const parts =
    field.unhealthy && field.reason && field.reason !== phase
      ? [field.reason, restarts]
      : [`${where} ${phase}`, field.ready ? "ready" : "not ready", restarts];
  return { text: parts.filter(Boolean).join(" · "), tone, title };
}

/** The module a sidebar agent would be deployed from: one under `agents/` or `system_agents/`. */
export function deployableModule(entry: { transport: string; module?: string | undefined; handler?: string | undefined }): string | null {
  if (entry.transport !== "websocket") return null;
  const module = entry.module ?? entry.handler?.split(":")[0];
  if (!module) return null;
  const [top, ...rest] = module.split(".");
  return (top === "agents" || top === "system_agents") && rest.length > 0 ? module : null;
}

/**
 * What the sidebar offers for an agent with the sandbox on: "Deploy" for a stopped WebSocket agent
 * of `agents/` or `system_agents/`, "Redeploy" (replace its Pod) for one the sandbox runs, nothing
 * for one connected from elsewhere (a second copy would fight it for the agent id).
 */
export function deployAction(entry: {
  transport: string;
  status: string;
  module?: string | undefined;
  handler?: string | undefined;
  sandbox?: SandboxField | undefined;
}): { module: string; label: "Deploy" | "Redeploy" } | null {
  const module = deployableModule(entry);
  if (!module) return null;
  if (entry.sandbox) return { module, label: "Redeploy" };
  return entry.status === "online" || entry.status === "UP" ? null : { module, label: "Deploy" };
}

/** The body of `POST /internal/sandbox-agent/start` for a sidebar or linked agent. */
export function startBody(agentId: string, module: string): { agent_id: string; module: string; placement: "new_pod" } {
  return { agent_id: agentId, module, placement: "new_pod" };
}
