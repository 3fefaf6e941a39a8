import { describe, expect, it } from "vitest";
import { createAppStore } from "./store";

const SOURCE = '# module: unit_converter\nAGENT_ID = "unit-converter"\n';
const CHECKS = [
  { name: "module_name", passed: true, detail: "unit_converter" },
  { name: "parses", passed: true, detail: "" },
  { name: "smoke_import", passed: true, detail: "imported in a subprocess" },
];

interface Call {
  method: string;
  path: string;
  body: Record<string, unknown> | undefined;
}

type Route = (call: Call) => Response | undefined;

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

/** A fake master with the builder, discovery and restore routes; `routes` override them. */
function fakeMaster(routes: Route[] = []) {
  const calls: Call[] = [];
  const files = new Set<string>(["taken"]);
  const discovered: Record<string, unknown>[] = [];
  const fetch = async (url: string, init?: RequestInit) => {
    const call: Call = {
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

const base = { storage: null, pollMs: 0 } as const;

async function connected(routes: Route[] = []) {
  const master = fakeMaster(routes);
  const store = createAppStore({ ...base, fetch: master.fetch });
  expect(await store.getState().connect("http://m", "k")).toBe(true);
  return { master, store };
}

function describeAgent(store: Awaited<ReturnType<typeof connected>>["store"]) {
  store.getState().setBuilderForm({ name: "Unit converter", description: "Converts km to miles", tools: "convert" });
}

describe("store: discovery problems", () => {
  it("keeps GET /agents/discover's per-file errors for the sidebar", async () => {
    const { store } = await connected();
    expect(store.getState().discoveryErrors).toEqual([{ file: "agents/broken.py", error: "line 3: invalid syntax", module: "agents.broken" }]);
  });
});

describe("store: agent builder", () => {
  it("loads the generator's models, generates with the chosen one and shows the code and checks", async () => {
    const { master, store } = await connected();
    await store.getState().openBuilder();
    expect(store.getState().builder.models?.allowed_models).toEqual(["m1", "m2"]);
    expect(store.getState().builder.form.model).toBe("m1");
    describeAgent(store);
    store.getState().setBuilderForm({ model: "m2", requiresCollaboration: true });
    await store.getState().generateAgent();
    expect(master.calls.find((c) => c.path === "/generate-agent")?.body).toEqual({
      name: "Unit converter",
      description: "Converts km to miles",
      agent_type: "action",
      transport: "websocket",
      requires_collaboration: true,
      model: "m2",
      tools: ["convert"],
    });
    const b = store.getState().builder;
    expect(b.generated).toMatchObject({ source: SOURCE, passed: true, attempts: 2, agentId: "unit-converter" });
    expect(b.generated?.checks.map((c) => c.name)).toEqual(["module_name", "parses", "smoke_import"]);
    expect(b.module).toBe("unit_converter");
    expect(b.error).toBeNull();
  });

  it("refuses an empty description without calling the master", async () => {
    const { master, store } = await connected();
    store.getState().setBuilderForm({ name: "x" });
    await store.getState().generateAgent();
    expect(store.getState().builder.error?.message).toBe("Describe what the agent should do");
    expect(master.calls.some((c) => c.path === "/generate-agent")).toBe(false);
  });

  it("a 422 shows the failed checks and the code, with the master's message", async () => {
    const failed = {
      detail: {
        code: "checks_failed",
        message: "the generated code still fails restricted_calls after 2 attempts",
        module: "unit_converter",
        source: "import subprocess\n",
        checks: [
          { name: "parses", passed: true, detail: "" },
          { name: "restricted_calls", passed: false, detail: "line 1: 'subprocess' is not allowed" },
        ],
      },
    };
    const { store } = await connected([(c) => (c.path === "/generate-agent" ? json(failed, 422) : undefined)]);
    describeAgent(store);
    await store.getState().generateAgent();
    const b = store.getState().builder;
    expect(b.error).toEqual({ status: 422, message: "422 Invalid request: the generated code still fails restricted_calls after 2 attempts" });
    expect(b.generated).toMatchObject({ source: "import subprocess\n", passed: false, module: "unit_converter" });
    expect(b.generated?.checks.filter((c) => !c.passed)).toEqual([
      { name: "restricted_calls", passed: false, detail: "line 1: 'subprocess' is not allowed" },
    ]);
  });

  it("a 502 from the LLM and a 403 with the generator off are shown in the panel", async () => {
    const llmDown = { detail: { code: "llm_error", message: "the LLM failed: 500 scripted outage" } };
    const { store } = await connected([(c) => (c.path === "/generate-agent" ? json(llmDown, 502) : undefined)]);
    describeAgent(store);
    await store.getState().generateAgent();
    expect(store.getState().builder.error).toEqual({ status: 502, message: "502 Bad gateway: the LLM provider failed: the LLM failed: 500 scripted outage" });
    expect(store.getState().builder.generated).toBeNull();

    const off = { detail: "the agent generator is disabled (OPENAGENT_AGENT_GENERATOR=0)" };
    const other = await connected([(c) => (c.path.startsWith("/generate-agent") ? json(off, 403) : undefined)]);
    await other.store.getState().openBuilder();
    expect(other.store.getState().builder.unavailable).toBe(
      "403 Forbidden: this feature is switched off on the master: the agent generator is disabled (OPENAGENT_AGENT_GENERATOR=0)",
    );
  });

  it("saves under the edited module name, then the agent is in discovery, ready to drag", async () => {
    const { master, store } = await connected();
    describeAgent(store);
    await store.getState().generateAgent();
    store.getState().setBuilderModule("my_converter");
    await store.getState().saveAgent();
    expect(master.calls.find((c) => c.path === "/save-agent")?.body).toEqual({ module: "my_converter", source: SOURCE, overwrite: false });
    expect(store.getState().builder.saved).toEqual({ module: "my_converter", file: "agents/my_converter.py", handler: "agents.my_converter", agentId: "unit-converter" });
    const entry = store.getState().catalogById["unit-converter"];
    expect(entry).toMatchObject({ source: "discover", handler: "agents.my_converter", status: "offline" });
    expect(store.getState().notices.at(-1)?.text).toBe("Saved agents/my_converter.py: unit-converter is listed in the sidebar, ready to drag");
  });

  it("asks before overwriting an existing module, and overwrites when confirmed", async () => {
    const { master, store } = await connected();
    describeAgent(store);
    await store.getState().generateAgent();
    store.getState().setBuilderModule("bad name");
    await store.getState().saveAgent();
    expect(store.getState().builder.error?.message).toMatch(/^Module name: letters, digits/);
    store.getState().setBuilderModule("taken");
    await store.getState().saveAgent();
    expect(store.getState().builder.confirmOverwrite).toBe("400 Bad request: agents/taken.py exists; send overwrite: true to replace it");
    expect(store.getState().builder.saved).toBeNull();
    await store.getState().saveAgent(true);
    expect(store.getState().builder.confirmOverwrite).toBeNull();
    expect(store.getState().builder.saved?.file).toBe("agents/taken.py");
    expect(master.calls.filter((c) => c.path === "/save-agent").map((c) => c.body?.overwrite)).toEqual([false, true]);
  });
});

describe("store: restore on master", () => {
  it("sends the canvas's workspace YAML and keeps each agent's outcome", async () => {
    const { master, store } = await connected();
    store.getState().addAgent("document-indexer-agent", { x: 100, y: 0 });
    await store.getState().restoreOnMaster();
    const sent = master.calls.find((c) => c.path === "/internal/workspace/restore")?.body;
    expect(sent).toEqual({ yaml: store.getState().exportYaml() });
    expect(String(sent?.yaml)).toContain("agent_id: document-indexer-agent");
    const restore = store.getState().restore;
    expect(restore).toMatchObject({ open: true, phase: "done", error: null });
    expect(restore.outcomes.map((o) => o.status)).toEqual(["registered", "unreachable", "invalid"]);
    expect(store.getState().notices.at(-1)?.text).toBe("Restore on master: 1 registered · 1 unreachable · 1 invalid");
  });

  it("shows the master's refusal: restore switched off, or a YAML problem with its line", async () => {
    const off = { detail: "workspace restore is disabled (OPENAGENT_WORKSPACE_RESTORE=0)" };
    const { store } = await connected([(c) => (c.path === "/internal/workspace/restore" ? json(off, 403) : undefined)]);
    await store.getState().restoreOnMaster();
    expect(store.getState().restore).toMatchObject({
      phase: "error",
      error: "403 Forbidden: this feature is switched off on the master: workspace restore is disabled (OPENAGENT_WORKSPACE_RESTORE=0)",
    });
    const bad = { detail: { code: "invalid", message: "the workspace is invalid", problems: [{ line: 4, field: "agents[0].toolz", message: "unknown field 'toolz'" }] } };
    const other = await connected([(c) => (c.path === "/internal/workspace/restore" ? json(bad, 400) : undefined)]);
    await other.store.getState().restoreOnMaster();
    expect(other.store.getState().restore.error).toBe("400 Bad request: the workspace is invalid\nline 4: agents[0].toolz: unknown field 'toolz'");
  });
});
