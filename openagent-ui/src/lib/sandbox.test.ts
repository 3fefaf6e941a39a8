import { describe, expect, it } from "vitest";
import { agentRow, discoveredRow } from "../api/fixtures";
import type { SandboxField } from "../api/types";
import { fromAgentRow, mergeCatalog } from "./agents";
import { deployAction, deployableModule, sandboxBadge, sandboxFieldOf, startBody } from "./sandbox";

const running: SandboxField = { placement: "new_pod", namespace: "agents", pod: "oa-agent-weather", code: "module:agents.weather", phase: "Running", ready: true, restarts: 0, reason: null, unhealthy: false };

describe("sandboxBadge", () => {
  it("says phase, readiness and restarts of a healthy Pod", () => {
    expect(sandboxBadge(running)).toEqual({
      text: "Pod Running · ready · 0 restarts",
      tone: "ok",
      title: "Pod oa-agent-weather · namespace agents · module:agents.weather",
    });
    expect(sandboxBadge({ ...running, restarts: 1 }).text).toBe("Pod Running · ready · 1 restart");
  });

  it("shows a starting Pod as pending", () => {
    expect(sandboxBadge({ ...running, phase: "Pending", ready: false, reason: "ContainerCreating" })).toMatchObject({
      text: "Pod Pending · not ready · 0 restarts",
      tone: "pending",
    });
  });

  it("names the reason of an unhealthy container instead of its phase", () => {
    const crashing = { ...running, ready: false, restarts: 5, reason: "CrashLoopBackOff", unhealthy: true, log_tail: ["boom"] };
    expect(sandboxBadge(crashing)).toMatchObject({ text: "CrashLoopBackOff · 5 restarts", tone: "error" });
    expect(sandboxBadge({ ...running, phase: "Failed", ready: false, reason: null, unhealthy: true })).toMatchObject({
      text: "Pod Failed · not ready · 0 restarts",
      tone: "error",
    });
  });

  it("says when the Pod is gone or the cluster did not answer", () => {
    expect(sandboxBadge({ ...running, phase: "Missing", ready: false, restarts: null, unhealthy: true })).toMatchObject({
      text: "Pod missing",
      tone: "error",
    });
    const unreachable = sandboxBadge({ ...running, phase: "Unknown", ready: false, restarts: null, error: "the cluster did not answer" });
    expect(unreachable.text).toBe("Cluster unreachable");
    expect(unreachable.title).toContain("error: the cluster did not answer");
  });

  it("says Pool for an agent in a pool runner, with the runner's restarts", () => {
    const pooled: SandboxField = { placement: "pool", pod: "agent-pool-0", phase: "Running", ready: true, restarts: 2, pool_status: "running" };
    expect(sandboxBadge(pooled)).toMatchObject({ text: "Pool Running · ready · 2 restarts", tone: "ok" });
    expect(sandboxBadge(pooled).title).toContain("pool runner Pod agent-pool-0");
    expect(sandboxBadge({ ...pooled, ready: false, restarts: null, reason: "not running in the pool", unhealthy: true }).text).toBe(
      "not running in the pool",
    );
  });
});

describe("sandbox field of GET /agents rows", () => {
  it("keeps the field of a deployed agent and ignores null or malformed ones", () => {
    expect(sandboxFieldOf(running)).toBe(running);
    expect(sandboxFieldOf(null)).toBeNull();
    expect(sandboxFieldOf({ phase: "Running" })).toBeNull();
    expect(sandboxFieldOf([running])).toBeNull();
    expect(fromAgentRow(agentRow({ agent_id: "w", connection_type: "websocket", sandbox: running })).sandbox).toEqual(running);
    expect(fromAgentRow(agentRow({ agent_id: "w", connection_type: "websocket", sandbox: null })).sandbox).toBeUndefined();
  });

  it("lists a deployed agent that has not connected as offline, with the module discovery knows", () => {
    const rows = mergeCatalog(
      [agentRow({ agent_id: "weather", role: "action", connection_type: "sandbox", status: "starting", sandbox: { ...running, ready: false, phase: "Pending" } })],
      [discoveredRow({ agent_id: "weather", transport: "websocket", module: "agents.weather" })],
      [],
      [],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ agentId: "weather", status: "offline", transport: "websocket", module: "agents.weather", source: "master" });
    expect(rows[0]!.sandbox?.phase).toBe("Pending");
  });
});

describe("deployableModule", () => {
  it("deploys WebSocket agents of agents/ and system_agents/ only", () => {
    expect(deployableModule({ transport: "websocket", module: "agents.weather" })).toBe("agents.weather");
    expect(deployableModule({ transport: "websocket", handler: "system_agents.document_indexer_agent:main" })).toBe(
      "system_agents.document_indexer_agent",
    );
    expect(deployableModule({ transport: "websocket", module: "sample_agents.demo" })).toBeNull();
    expect(deployableModule({ transport: "websocket", module: "agents" })).toBeNull();
    expect(deployableModule({ transport: "websocket" })).toBeNull();
    expect(deployableModule({ transport: "invocation", module: "agents.weather" })).toBeNull();
    expect(startBody("weather", "agents.weather")).toEqual({ agent_id: "weather", module: "agents.weather", placement: "new_pod" });
  });
});

describe("deployAction", () => {
  const agent = { transport: "websocket", module: "agents.weather" };
  it("offers Deploy for a stopped agent, Redeploy for a sandboxed one, nothing for one running elsewhere", () => {
    expect(deployAction({ ...agent, status: "offline" })).toEqual({ module: "agents.weather", label: "Deploy" });
    expect(deployAction({ ...agent, status: "online", sandbox: running })).toEqual({ module: "agents.weather", label: "Redeploy" });
    expect(deployAction({ ...agent, status: "offline", sandbox: { ...running, phase: "Pending" } })?.label).toBe("Redeploy");
    expect(deployAction({ ...agent, status: "online" })).toBeNull();
    expect(deployAction({ transport: "websocket", module: "sample_agents.demo", status: "offline" })).toBeNull();
  });
});
