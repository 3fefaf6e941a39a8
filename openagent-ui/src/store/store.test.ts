import { describe, expect, it } from "vitest";
import { GLOW_FADE_MS, createAppStore } from "./store";

interface Call {
  method: string;
  path: string;
  body: unknown;
  auth: string | null;
}

/** A fake master: routes by method and path, records every request. */
function fakeMaster(
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

function timers() {
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

const base = { storage: null, pollMs: 0 } as const;

describe("store: connect", () => {
  it("shows the master's 401 message for a wrong key", async () => {
    const master = fakeMaster({ key: "right" });
    const store = createAppStore({ ...base, fetch: master.fetch });
    expect(await store.getState().connect("http://m", "wrong")).toBe(false);
    expect(store.getState().connection).toBe("error");
    expect(store.getState().connectionError).toBe("401 Unauthorized: the master refused the API key: missing or invalid API key");
  });

  it("loads agents, models and the RAG rows, sending the key on every request", async () => {
    const master = fakeMaster({ key: "k" });
    const store = createAppStore({ ...base, fetch: master.fetch });
    expect(await store.getState().connect("http://m/", "k")).toBe(true);
    const s = store.getState();
    expect(s.catalog.map((e) => e.label)).toEqual(["demo", "RAG · Extractor", "RAG · Indexer"]);
    expect(s.models).toEqual(["gpt-4o-mini", "gpt-4o"]);
    expect(s.model).toBe("gpt-4o-mini");
    expect(master.calls.filter((c) => c.path !== "/health").every((c) => c.auth === "Bearer k")).toBe(true);
  });
});

describe("store: canvas", () => {
  it("linking an HTTP agent registers it; linking a stopped WS agent shows how to start it", async () => {
    const master = fakeMaster();
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    store.getState().addAgent("demo", { x: 300, y: 0 });
    await store.getState().link("demo");
    const register = master.calls.find((c) => c.path === "/register");
    expect(register?.body).toMatchObject({ agent_id: "demo", invocation_base_url: "http://127.0.0.1:9000", tools: [{ name: "echo", endpoint: "/run" }] });
    expect(store.getState().linkNotes.demo?.kind).toBe("registered");

    await store.getState().link("document-indexer-agent");
    expect(store.getState().linkNotes["document-indexer-agent"]).toEqual({
      kind: "start",
      text: "MASTER_WS=ws://m/ws PYTHONPATH=. python -m system_agents.document_indexer_agent",
    });
  });

  it("undoes and redoes adding, linking and deleting", async () => {
    const store = createAppStore({ ...base, fetch: fakeMaster().fetch });
    const ids = () => store.getState().nodes.map((n) => n.id);
    store.getState().addAgent("a", { x: 1, y: 1 });
    await store.getState().link("a");
    expect(store.getState().edges.map((e) => e.id)).toContain("link:a");
    store.getState().onDelete({ nodes: store.getState().nodes.filter((n) => n.id === "agent:a"), edges: [] });
    expect(ids()).not.toContain("agent:a");
    expect(store.getState().edges.map((e) => e.id)).not.toContain("link:a");
    store.getState().undo();
    expect(ids()).toContain("agent:a");
    expect(store.getState().edges.map((e) => e.id)).toContain("link:a");
    store.getState().undo();
    expect(store.getState().edges.map((e) => e.id)).not.toContain("link:a");
    store.getState().redo();
    store.getState().redo();
    expect(ids()).not.toContain("agent:a");
  });

  it("never deletes the orchestrator or the query client", () => {
    const store = createAppStore(base);
    store.getState().onDelete({ nodes: store.getState().nodes, edges: store.getState().edges });
    expect(store.getState().nodes.map((n) => n.id)).toEqual(["orchestrator", "query-client"]);
    expect(store.getState().edges).toHaveLength(1);
  });

  it("exports and imports the same canvas", async () => {
    const store = createAppStore({ ...base, fetch: fakeMaster().fetch });
    await store.getState().connect("http://m", "");
    store.getState().addAgent("demo", { x: 200, y: 50 });
    await store.getState().link("demo");
    store.getState().addAgent("document-indexer-agent", { x: 400, y: -50 });
    const text = store.getState().exportYaml();
    const other = createAppStore({ ...base, fetch: fakeMaster().fetch });
    await other.getState().connect("http://m", "");
    expect(other.getState().importYaml(text)).toBe(true);
    expect(other.getState().exportYaml()).toBe(text);
  });
});

describe("store: chat", () => {
  const stream = [
    'event: tool_call\ndata: {"call_id": "c1", "agent_id": "demo", "tool_name": "echo", "arguments": {"text": "hi"}}\n\n',
    'event: tool_result\ndata: {"call_id": "c1", "agent_id": "demo", "tool_name": "echo", "success": true, "result": {"echo": "hi"}}\n\n',
    'event: token\ndata: {"text": "hi"}\n\n',
    'event: query_result\ndata: {"query_id": "q", "session_id": "s1", "success": true, "answer": "hi", "agents_used": [{"agent_id": "demo", "tool_name": "echo"}], "status": "completed"}\n\n',
  ].join("");

  it("scopes the query to linked agents, logs the call, glows the agent and fades it after 4 s", async () => {
    const master = fakeMaster({ stream });
    const t = timers();
    const store = createAppStore({ ...base, fetch: master.fetch, setTimer: t.setTimer, clearTimer: t.clearTimer });
    await store.getState().connect("http://m", "");
    await store.getState().link("demo");
    await store.getState().send("say hi");
    const query = master.calls.find((c) => c.path === "/query");
    expect(query?.body).toMatchObject({ query: "say hi", allowed_agent_ids: ["demo"], stream: true });
    const s = store.getState();
    expect(s.sessionId).toBe("s1");
    expect(s.glow["agent:demo"]?.phase).toBe("fading");
    expect(s.callLogs.demo).toMatchObject([{ toolName: "echo", state: "ok", result: { echo: "hi" } }]);
    expect(s.transcript.map((e) => e.kind)).toEqual(["user", "assistant"]);
    t.fire(GLOW_FADE_MS);
    expect(store.getState().glow["agent:demo"]).toBeUndefined();
    expect(store.getState().curl()).toContain('"allowed_agent_ids":["demo"]');
  });

  const attached = [{ filename: "notes.md", mime_type: "text/markdown", content_base64: "aGVsbG8=" }];

  it("takes the master's attachment limits and lists the session's files after an attached query", async () => {
    const master = fakeMaster({ stream });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    expect(store.getState().maxAttachmentBytes).toBe(4096);
    expect(store.getState().maxAttachments).toBe(3);
    expect(await store.getState().send("what is in it?", attached)).toBe(true);
    expect(master.calls.find((c) => c.path === "/query")?.body).toMatchObject({ attachments: attached });
    expect(store.getState().sessionFiles).toMatchObject([{ filename: "notes.md", status: "indexed", chunks: 1 }]);
    await store.getState().newSession();
    expect(store.getState().sessionFiles).toEqual([]);
  });

  it("shows a streamed attachment refusal naming the file, and reports it as refused", async () => {
    const refusal =
      'event: query_result\ndata: {"query_id": "q", "success": false, "error_code": "attachment_too_large", "error": "attachment \'big.txt\' is 5000 bytes; the limit is 4096 bytes per file (RAG_MAX_ATTACHMENT_BYTES)", "status": "failed"}\n\n';
    const master = fakeMaster({ stream: refusal });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    expect(await store.getState().send("x", attached)).toBe(false);
    expect(store.getState().attachmentError).toMatch(/^413 · attachment 'big.txt' is 5000 bytes/);
    expect(store.getState().notices.at(-1)?.text).toMatch(/big.txt/);
    expect(store.getState().sessionFiles).toEqual([]);
  });

  it("shows a plain 400 refusal of an attachment with the master's message", async () => {
    const body = { success: false, error_code: "invalid_attachment", error: "attachment 'r.pdf': declared as application/pdf but the content is plain text" };
    const master = fakeMaster({ refuse: { status: 400, body } });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    expect(await store.getState().send("x", attached)).toBe(false);
    expect(store.getState().attachmentError).toBe("400 Bad request: attachment 'r.pdf': declared as application/pdf but the content is plain text");
  });

  it("New session clears the transcript and deletes the server-side session", async () => {
    const master = fakeMaster({ stream });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().send("hi");
    await store.getState().newSession();
    expect(store.getState().transcript).toEqual([]);
    expect(store.getState().sessionId).toBeNull();
    expect(master.calls.some((c) => c.method === "DELETE" && c.path === "/sessions/s1")).toBe(true);
  });
});

describe("store: Start in master", () => {
  const INDEXER = "document-indexer-agent";

  it("sends a one-agent workspace to POST /internal/yaml-agents/start and notes the outcome", async () => {
    const master = fakeMaster({
      yamlStart: { status: 200, body: { agents: [{ agent_id: INDEXER, status: "started", handler: "system_agents.document_indexer_agent" }] } },
    });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m:8000", "");
    await store.getState().link(INDEXER);
    expect(store.getState().linkNotes[INDEXER]?.kind).toBe("start");
    await store.getState().startInMaster(INDEXER);
    const call = master.calls.find((c) => c.path === "/internal/yaml-agents/start");
    const yaml = (call?.body as { yaml: string }).yaml;
    expect(yaml).toContain("agent_id: document-indexer-agent");
    expect(yaml).toContain("handler: system_agents.document_indexer_agent");
    expect(yaml).toContain("transport: websocket");
    expect(yaml).not.toContain("demo");
    expect(store.getState().linkNotes[INDEXER]).toEqual({ kind: "started", text: "Started in the master (system_agents.document_indexer_agent)" });
  });

  it("shows a failed start and the master's 403", async () => {
    const failed = fakeMaster({
      yamlStart: { status: 200, body: { agents: [{ agent_id: INDEXER, status: "failed", reason: "cannot import 'x'" }] } },
    });
    const store = createAppStore({ ...base, fetch: failed.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().startInMaster(INDEXER);
    expect(store.getState().linkNotes[INDEXER]).toEqual({ kind: "error", text: "Not started: failed: cannot import 'x'" });

    const off = fakeMaster({ yamlStart: { status: 403, body: { detail: "the YAML agent runner is disabled (OPENAGENT_YAML_RUNNER=0)" } } });
    const other = createAppStore({ ...base, fetch: off.fetch });
    await other.getState().connect("http://m", "");
    await other.getState().startInMaster(INDEXER);
    expect(other.getState().linkNotes[INDEXER]?.text).toMatch(/^403 Forbidden.*OPENAGENT_YAML_RUNNER=0/);
    expect(other.getState().notices.at(-1)?.text).toContain("OPENAGENT_YAML_RUNNER=0");
  });
});

/** A fake master with the sandbox on: start/stop/logs change what `GET /agents` lists. */
function sandboxMaster(options: { logs?: { status: number; body: unknown } } = {}) {
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

describe("store: sandbox", () => {
  it("Deploy and linking take one path: POST start with the module and new_pod, then the Pod status is listed", async () => {
    const master = sandboxMaster();
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    expect(store.getState().sandboxEnabled).toBe(true);

    await store.getState().link("weather");
    const starts = () => master.calls.filter((c) => c.path === "/internal/sandbox-agent/start");
    expect(starts().map((c) => c.body)).toEqual([{ agent_id: "weather", module: "agents.weather", placement: "new_pod" }]);
    expect(store.getState().linkNotes.weather).toEqual({ kind: "deployed", text: "Deployed to the sandbox (Pod oa-agent-weather); waiting for it to connect" });
    // Refreshed at once: the node has its Pod status.
    expect(store.getState().catalogById.weather).toMatchObject({ status: "offline", module: "agents.weather", sandbox: { phase: "Pending", pod: "oa-agent-weather" } });

    // Linking again leaves the starting deployment alone; Deploy replaces it on purpose.
    store.getState().unlink("weather");
    await store.getState().link("weather");
    expect(starts()).toHaveLength(1);
    expect(await store.getState().deploy("weather")).toBe(true);
    expect(starts()).toHaveLength(2);
    expect(starts()[1]!.body).toEqual(starts()[0]!.body);
  });

  it("linking with the sandbox on but no agents/ or system_agents/ module shows the start command instead", async () => {
    const master = sandboxMaster();
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().link("sampled");
    expect(master.calls.some((c) => c.path === "/internal/sandbox-agent/start")).toBe(false);
    expect(store.getState().linkNotes.sampled).toEqual({ kind: "start", text: "MASTER_WS=ws://m/ws PYTHONPATH=. python -m sample_agents.sampled" });
    expect(await store.getState().deploy("sampled")).toBe(false);
    expect(store.getState().linkNotes.sampled?.kind).toBe("error");
    expect(await store.getState().deploy("document-indexer-agent")).toBe(true);
    expect(master.calls.find((c) => c.path === "/internal/sandbox-agent/start")?.body).toEqual({ agent_id: "document-indexer-agent", module: "system_agents.document_indexer_agent", placement: "new_pod" });
  });

  it("Stop tears the deployment down and the row loses its status; a second Stop shows the master's 404", async () => {
    const master = sandboxMaster();
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().deploy("weather");
    await store.getState().stopDeployment("weather");
    expect(master.calls.find((c) => c.path === "/internal/sandbox-agent/stop")?.body).toEqual({ agent_id: "weather" });
    expect(store.getState().linkNotes.weather?.kind).toBe("stopped");
    expect(store.getState().catalogById.weather?.sandbox).toBeUndefined();

    await store.getState().stopDeployment("weather");
    expect(store.getState().linkNotes.weather).toEqual({ kind: "error", text: "404 Not found: agent 'weather' has no sandbox workload" });
    expect(store.getState().notices.at(-1)?.text).toContain("Stopping weather failed");
  });

  it("Logs loads the log tail into the dialog", async () => {
    const master = sandboxMaster();
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().openSandboxLogs("weather");
    expect(master.calls.at(-1)?.path).toBe("/internal/sandbox-agent/logs?agent_id=weather&tail_lines=200");
    expect(store.getState().sandboxLogs).toEqual({
      open: true,
      agentId: "weather",
      phase: "done",
      lines: ["starting", "Traceback: boom"],
      podName: "oa-agent-weather",
      error: null,
    });
    store.getState().closeSandboxLogs();
    expect(store.getState().sandboxLogs.open).toBe(false);
  });

  it.each([
    [403, { detail: "the Kubernetes sandbox is off: set OPENAGENT_K8S_SANDBOX=1" }, "403 Forbidden: this feature is switched off on the master: the Kubernetes sandbox is off: set OPENAGENT_K8S_SANDBOX=1"],
    [503, { detail: "the Kubernetes API at http://k did not answer" }, "503 Unavailable: the Kubernetes API at http://k did not answer"],
    [404, { detail: { code: "not_deployed", message: "agent 'weather' has no sandbox workload" } }, "404 Not found: agent 'weather' has no sandbox workload"],
  ])("a failed logs request (%i) shows the master's message", async (status, body, message) => {
    const master = sandboxMaster({ logs: { status, body } });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().openSandboxLogs("weather");
    expect(store.getState().sandboxLogs).toMatchObject({ open: true, phase: "error", lines: [], error: message });
  });
});
