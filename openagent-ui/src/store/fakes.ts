/**
 * Fake masters for the store's tests: each routes by method and path and records every
 * request, so a test asserts what the page sent as well as what it shows.
 */
import { expect } from "vitest";
import { createAppStore } from "./store";

export const base = { storage: null, pollMs: 0 } as const;

export const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

export interface Call {
  method: string;
  path: string;
  body: unknown;
  auth: string | null;
}

/** A fake master: routes by method and path, records every request. */
export function fakeMaster(
  options: { key?: string; stream?: string; refuse?: { status: number; body: unknown }; yamlStart?: { status: number; body: unknown } } = {},
) {
  const calls: Call[] = [];
  const agents = [
    {
      agent_id: "demo",
      connection_type: "invocation",
      status: "UP",
      invocation_base_url: "http://127.0.0.1:9000",
      tools: [{ name: "echo", description: "Echo", parameters: { type: "object", properties: {} }, endpoint: "/run" }],
    },
  ];
  const json = (body: unknown, status = 200) =>
    new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
  const fetch = async (url: string, init?: RequestInit) => {
    const path = new URL(url).pathname;
    const method = init?.method ?? "GET";
    const auth = new Headers(init?.headers).get("authorization");
    calls.push({ method, path, body: init?.body ? JSON.parse(String(init.body)) : undefined, auth });
    if (path === "/health") return json({ status: "ok" });
    if (options.key && auth !== `Bearer ${options.key}`) return json({ detail: "missing or invalid API key" }, 401);
    if (path === "/agents") return json({ agents });
    if (path === "/query/orchestrator-models")
      return json({
        allowed_models: ["gpt-4o-mini", "gpt-4o"],
        default_model: "gpt-4o-mini",
        prompt_profiles: ["default", "auto_multi", "reasoning"],
        attachment_limits: { max_bytes: 4096, max_count: 3 },
      });
    if (path === "/query/session-rag-context")
      return json({ session_id: "s1", attachments: [{ ref: "att_1", filename: "notes.md", size: 5, index: { status: "indexed", chunks: 1 } }] });
    if (path === "/query" && options.refuse) return json(options.refuse.body, options.refuse.status);
    if (path === "/register") return json({ registered: true, status: "UP" });
    if (path === "/internal/yaml-agents/start" && options.yamlStart) return json(options.yamlStart.body, options.yamlStart.status);
    if (path === "/query") return new Response(options.stream ?? "", { headers: { "content-type": "text/event-stream" } });
    if (path.startsWith("/sessions/") && method === "DELETE") return json({ deleted: true });
    return json({ detail: "Not Found" }, 404);
  };
  return { calls, fetch };
}

export function timers() {
  const pending: { fn: () => void; ms: number; done: boolean }[] = [];
  return {
    pending,
    setTimer: (fn: () => void, ms: number) => {
      const t = { fn, ms, done: false };
      pending.push(t);
      return t;
    },
    clearTimer: (h: unknown) => {
      (h as { done: boolean }).done = true;
    },
    fire(ms: number) {
      for (const t of pending.filter((p) => !p.done && p.ms === ms)) {
        t.done = true;
        t.fn();
      }
    },
  };
}

/** A fake master with the sandbox on: start/stop/logs change what `GET /agents` lists. */
export function sandboxMaster(options: { logs?: { status: number; body: unknown } } = {}) {
  const calls: Call[] = [];
  const deployed = new Map<string, Record<string, unknown>>();
  const json = (body: unknown, status = 200) =>
    new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
  const fetch = async (url: string, init?: RequestInit) => {
    const parsed = new URL(url);
    const path = parsed.pathname;
    const method = init?.method ?? "GET";
    const body = init?.body ? (JSON.parse(String(init.body)) as Record<string, string>) : undefined;
    calls.push({ method, path: `${path}${parsed.search}`, body, auth: null });
    if (path === "/health") return json({ status: "ok" });
    if (path === "/internal/sandbox/status") return json({ enabled: true, namespace: "agents", cluster: { reachable: true } });
    if (path === "/agents/discover")
      return json({
        agents: [
          { agent_id: "weather", transport: "websocket", module: "agents.weather", handler: "agents.weather" },
          { agent_id: "sampled", transport: "websocket", module: "sample_agents.sampled", handler: "sample_agents.sampled" },
        ],
        errors: [],
      });
    if (path === "/agents")
      return json({
        agents: [...deployed.entries()].map(([agentId, field]) => ({
          agent_id: agentId,
          role: "action",
          connection_type: "sandbox",
          status: "starting",
          tools: [],
          sandbox: field,
        })),
      });
    if (path === "/internal/sandbox-agent/start" && body) {
      deployed.set(body.agent_id!, { placement: "new_pod", namespace: "agents", pod: `oa-agent-${body.agent_id}`, phase: "Pending", ready: false, restarts: 0 });
      return json({ agent_id: body.agent_id, placement: "new_pod", pod_name: `oa-agent-${body.agent_id}` }, 201);
    }
    if (path === "/internal/sandbox-agent/stop" && body) {
      if (!deployed.delete(body.agent_id!)) return json({ detail: { code: "not_deployed", message: `agent '${body.agent_id}' has no sandbox workload` } }, 404);
      return json({ agent_id: body.agent_id, stopped: true });
    }
    if (path === "/internal/sandbox-agent/logs") {
      if (options.logs) return json(options.logs.body, options.logs.status);
      const agentId = parsed.searchParams.get("agent_id");
      return json({ agent_id: agentId, placement: "new_pod", pod_name: `oa-agent-${agentId}`, lines: ["starting", "Traceback: boom"] });
    }
    return json({ detail: "Not Found" }, 404);
  };
  return { calls, fetch, deployed };
}

/* The builder, discovery and restore routes. */

export const SOURCE = '# module: unit_converter\nAGENT_ID = "unit-converter"\n';
export const CHECKS = [
  { name: "module_name", passed: true, detail: "unit_converter" },
  { name: "parses", passed: true, detail: "" },
  { name: "smoke_import", passed: true, detail: "imported in a subprocess" },
];

export interface BuilderCall {
  method: string;
  path: string;
  body: Record<string, unknown> | undefined;
}

export type Route = (call: BuilderCall) => Response | undefined;

/** A fake master with the builder, discovery and restore routes; `routes` override them. */
export function builderMaster(routes: Route[] = []) {
  const calls: BuilderCall[] = [];
  const files = new Set<string>(["taken"]);
  const discovered: Record<string, unknown>[] = [];
  const fetch = async (url: string, init?: RequestInit) => {
    const call: BuilderCall = {
      method: init?.method ?? "GET",
      path: new URL(url).pathname,
      body: init?.body ? (JSON.parse(String(init.body)) as Record<string, unknown>) : undefined,
    };
    calls.push(call);
    for (const route of routes) {
      const answer = route(call);
      if (answer) return answer;
    }
    if (call.path === "/health") return json({ status: "ok" });
    if (call.path === "/agents") return json({ agents: [] });
    if (call.path === "/query/orchestrator-models") return json({ allowed_models: ["m1"], default_model: "m1" });
    if (call.path === "/agents/discover")
      return json({ agents: discovered, errors: [{ file: "agents/broken.py", error: "line 3: invalid syntax", module: "agents.broken" }] });
    if (call.path === "/generate-agent/models") return json({ default_model: "m1", allowed_models: ["m1", "m2"], available: true });
    if (call.path === "/generate-agent")
      return json({ module: "unit_converter", agent_id: "unit-converter", source: SOURCE, transport: "websocket", tools: [{ name: "convert" }], checks: CHECKS, model: "m1", attempts: 2 });
    if (call.path === "/save-agent") {
      const module = String(call.body?.module);
      if (files.has(module) && !call.body?.overwrite)
        return json({ detail: { code: "file_exists", message: `agents/${module}.py exists; send overwrite: true to replace it` } }, 400);
      files.add(module);
      discovered.push({ agent_id: "unit-converter", transport: "websocket", module: `agents.${module}`, handler: `agents.${module}`, tools: [{ name: "convert" }] });
      return json({ saved: true, module, file: `agents/${module}.py`, handler: `agents.${module}` });
    }
    if (call.path === "/internal/workspace/restore")
      return json({
        agents: [
          { agent_id: "a", status: "registered" },
          { agent_id: "b", status: "unreachable", reason: "http://x/health failed" },
          { agent_id: "c", status: "invalid", reason: "tools.0.parameters: bad" },
        ],
      });
    return json({ detail: "Not Found" }, 404);
  };
  return { calls, fetch };
}

export async function connected(routes: Route[] = []) {
  const master = builderMaster(routes);
  const store = createAppStore({ ...base, fetch: master.fetch });
  expect(await store.getState().connect("http://m", "k")).toBe(true);
  return { master, store };
}

export function describeAgent(store: Awaited<ReturnType<typeof connected>>["store"]) {
  store.getState().setBuilderForm({ name: "Unit converter", description: "Converts km to miles", tools: "convert" });
}
