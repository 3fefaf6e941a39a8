import { describe, expect, it } from "vitest";
import { base, fakeMaster, json } from "./fakes";
import { createAppStore } from "./store";

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

  it("a key that may not register (client, viewer) links a registered HTTP agent without POST /register", async () => {
    const master = fakeMaster();
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    store.setState({ identity: { key_id: "k1", name: "wall", role: "viewer", tenant: "default", agent_ids: [], approves: [] } });
    expect(store.getState().canRegister()).toBe(false);
    await store.getState().link("demo");
    expect(master.calls.filter((c) => c.path === "/register")).toEqual([]);
    expect(store.getState().edges.some((e) => e.source === "agent:demo" || e.target === "agent:demo")).toBe(true);
    expect(store.getState().linkNotes.demo).toBeUndefined();
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
  it("links an MCP agent that is UP and says how to register one that is DOWN, without starting anything", async () => {
    const master = fakeMaster();
    const rows = [
      { agent_id: "gh", role: "action", connection_type: "mcp", status: "UP", mcp_url: "http://x:9/mcp", tools: [{ name: "search" }] },
      { agent_id: "gone", role: "action", connection_type: "mcp", status: "DOWN", mcp_url: "http://y:9/mcp", tools: [{ name: "t" }] },
    ];
    const fetch = async (url: string, init?: RequestInit) =>
      new URL(url).pathname === "/agents" ? json({ agents: rows }) : master.fetch(url, init);
    const store = createAppStore({ ...base, fetch });
    await store.getState().connect("http://m", "");
    expect(store.getState().catalogById.gh?.transport).toBe("mcp");
    const before = master.calls.length;
    await store.getState().link("gh");
    expect(store.getState().linkNotes.gh).toBeUndefined();
    await store.getState().link("gone");
    expect(store.getState().linkNotes.gone?.text).toContain("register it with POST /register (mcp_url, mcp_headers)");
    expect(master.calls.slice(before).filter((c) => c.method === "POST")).toEqual([]);
  });
});
