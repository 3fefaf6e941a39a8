import { agentRow } from "../api/fixtures";
import { describe, expect, it } from "vitest";
import { mergeCatalog, type CatalogEntry } from "./agents";
import { agentNode, baseEdges, baseNodes, linkEdge } from "./graph";
import {
  WorkspaceError,
  canvasToWorkspace,
  exportWorkspace,
  parseWorkspace,
  startWorkspace,
  workspaceEntries,
  workspaceToCanvas,
} from "./workspace";

const entries = new Map<string, CatalogEntry>(
  mergeCatalog(
    [
      agentRow({
        agent_id: "demo-invocation-agent",
        connection_type: "invocation",
        status: "UP",
        invocation_base_url: "http://user:pw@127.0.0.1:9000?api_key=x",
        metadata: { description: "demo", api_key: "sk-abcdefghijklmnopqrstuv", nested: { token: "t", ok: 1 } },
        tools: [{ name: "echo", description: "Echo", parameters: { type: "object", properties: {} }, endpoint: "/run" }],
      }),
      agentRow({ agent_id: "weather-agent", connection_type: "websocket", tools: [{ name: "get_weather" }] }),
    ],
    [],
  ).map((e) => [e.agentId, e]),
);

function canvas() {
  return {
    nodes: [
      ...baseNodes(),
      agentNode("weather-agent", { x: 300.123456, y: -20 }),
      agentNode("demo-invocation-agent", { x: 300, y: 200 }),
      agentNode("document-indexer-agent", { x: 600, y: 0 }),
    ],
    edges: [...baseEdges(), linkEdge("weather-agent"), linkEdge("demo-invocation-agent")],
  };
}
const master = { baseUrl: "http://127.0.0.1:8000", wsUrl: "ws://127.0.0.1:8000/ws" };

describe("export", () => {
  it("is byte-stable whatever the node order, and secret-free", () => {
    const a = exportWorkspace(canvasToWorkspace(canvas(), entries, master));
    const shuffled = canvas();
    shuffled.nodes.reverse();
    shuffled.edges.reverse();
    expect(exportWorkspace(canvasToWorkspace(shuffled, entries, master))).toBe(a);
    expect(a).not.toMatch(/sk-|api_key|token|user:pw/);
    expect(a).toMatch(/^# OpenAgent workspace, schema version 2/);
    expect(a).toContain("invocation_base_url: http://127.0.0.1:9000");
    expect(a).not.toContain("query-client");
    expect(a).toContain("x: 300.123");
    // The key order of openagent/workspace/export.py.
    expect(a).toMatch(/- agent_id: demo-invocation-agent\n  transport: invocation\n  invocation_base_url: [^\n]+\n  tools:/);
  });

  it("round-trips to the same canvas and the same bytes", () => {
    const text = exportWorkspace(canvasToWorkspace(canvas(), entries, master));
    const workspace = parseWorkspace(text);
    const back = workspaceToCanvas(workspace);
    const again = exportWorkspace(
      canvasToWorkspace(back, new Map(workspaceEntries(workspace).map((e) => [e.agentId, e])), master),
    );
    expect(again).toBe(text);
    expect(back.nodes.map((n) => n.id).sort()).toEqual(canvas().nodes.map((n) => n.id).sort());
    expect(back.edges.map((e) => e.id).sort()).toEqual(canvas().edges.map((e) => e.id).sort());
  });
});

describe("import", () => {
  it("names the line and field of an unknown field", () => {
    const text = "version: 1\nagents:\n- agent_id: a\n  transprt: websocket\n";
    expect(() => parseWorkspace(text)).toThrowError(/line 4: agents\[0\]\.transprt: unknown field 'transprt'/);
  });

  it("accepts a tool's requires_approval (as GET /agents lists it) and refuses one that is not a boolean", () => {
    const tool = (value: string) =>
      `version: 1\nagents:\n- agent_id: a\n  transport: websocket\n  tools:\n  - name: pay\n    requires_approval: ${value}\n`;
    expect(parseWorkspace(tool("true")).agents[0]?.tools?.[0]?.name).toBe("pay");
    expect(parseWorkspace(tool("null")).agents[0]?.tools?.[0]?.name).toBe("pay");
    expect(() => parseWorkspace(tool("yes please"))).toThrowError(/tools\[0\]\.requires_approval: must be true or false/);
  });

  it("refuses another version, bad links and invocation agents without a URL", () => {
    const bad = "version: 3\nagents:\n- agent_id: a\n  transport: invocation\nlinks:\n- source: ghost\n";
    try {
      parseWorkspace(bad);
      expect.unreachable();
    } catch (error) {
      const message = (error as WorkspaceError).message;
      expect(message).toContain("unsupported workspace version 3; this UI reads versions 1, 2");
      expect(message).toContain("needs invocation_base_url");
      expect(message).toContain("names unknown node 'ghost'");
    }
  });

  it("refuses an alias bomb", () => {
    const bomb = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (let i = 0; i < 8; i++) bomb.push(`${"bcdefghij"[i]}: &${"bcdefghij"[i]} [${Array(9).fill(`*${"abcdefghij"[i]}`).join(",")}]`);
    expect(() => parseWorkspace(bomb.join("\n"))).toThrowError(WorkspaceError);
  });

  it("injects the query client, lays out agents that have no position and drops builtin rows", () => {
    const ws = parseWorkspace(
      "agents:\n- agent_id: query-client\n  role: query\n  builtin: true\n- agent_id: a\n- agent_id: b\nlinks:\n- source: a\n",
    );
    expect(ws.agents.map((a) => a.agent_id)).toEqual(["a", "b"]);
    const c = workspaceToCanvas(ws);
    expect(c.nodes.map((n) => n.id)).toEqual(["orchestrator", "query-client", "agent:a", "agent:b"]);
    expect(c.nodes[2]!.position).not.toEqual(c.nodes[3]!.position);
    expect(c.edges.map((e) => e.id)).toEqual(["link:query-client", "link:a"]);
  });
});

describe("startWorkspace", () => {
  const master = { baseUrl: "http://u:p@m:8000", wsUrl: "ws://m:8000/ws" };
  it("is one linked WebSocket agent with its handler, which the workspace parser accepts", () => {
    const entry: CatalogEntry = {
      agentId: "greeter",
      label: "greeter",
      transport: "websocket",
      role: "action",
      source: "discover",
      status: "offline",
      tools: [{ name: "greet", description: "Greet" }],
      module: "agents.greeter",
    };
    const workspace = startWorkspace(entry, master)!;
    expect(workspace.agents).toMatchObject([{ agent_id: "greeter", transport: "websocket", handler: "agents.greeter" }]);
    expect(workspace.links).toEqual([{ source: "greeter", target: "orchestrator" }]);
    expect(workspace.master.base_url).toBe("http://m:8000");
    expect(parseWorkspace(exportWorkspace(workspace)).agents[0]?.handler).toBe("agents.greeter");
  });

  it("is null without a runnable module or for HTTP agents", () => {
    const base: CatalogEntry = { agentId: "x", label: "x", transport: "websocket", role: "action", source: "discover", status: "offline", tools: [] };
    expect(startWorkspace(base, master)).toBeNull();
    expect(startWorkspace({ ...base, module: "os.path" }, master)).toBeNull();
    expect(startWorkspace({ ...base, transport: "invocation", module: "agents.x" }, master)).toBeNull();
  });
});
