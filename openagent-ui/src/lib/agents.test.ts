import { describe, expect, it } from "vitest";
import { agentRow, discoveredRow } from "../api/fixtures";
import { filterCatalog, mergeCatalog, startCommand, type AgentRow } from "./agents";

const weather: AgentRow = agentRow({
  agent_id: "weather-agent",
  connection_type: "websocket",
  role: "action",
  tools: [{ name: "get_weather" }],
});
const demo: AgentRow = agentRow({
  agent_id: "demo-invocation-agent",
  connection_type: "invocation",
  status: "DOWN",
  last_error: "connection refused",
  invocation_base_url: "http://127.0.0.1:9000",
  tools: [{ name: "echo", endpoint: "/run" }],
});

describe("mergeCatalog", () => {
  it("lists the RAG rows even when the master has no agent", () => {
    const rows = mergeCatalog([], []);
    expect(rows.map((r) => r.label)).toEqual(["RAG · Extractor", "RAG · Indexer"]);
    expect(rows.every((r) => r.status === "offline")).toBe(true);
  });

  it("puts live agents first, with their status, and skips query clients", () => {
    const rows = mergeCatalog([weather, demo, agentRow({ agent_id: "q", role: "query" })], []);
    expect(rows.map((r) => [r.agentId, r.status])).toEqual([
      ["demo-invocation-agent", "DOWN"],
      ["weather-agent", "online"],
      ["document-extractor-agent", "offline"],
      ["document-indexer-agent", "offline"],
    ]);
    expect(rows[0]?.transport).toBe("invocation");
    expect(rows[0]?.lastError).toBe("connection refused");
  });

  it("keeps the built-in label and module of a RAG agent once it runs", () => {
    const rows = mergeCatalog([agentRow({ agent_id: "document-indexer-agent", connection_type: "websocket" })], []);
    const indexer = rows.find((r) => r.agentId === "document-indexer-agent");
    expect(indexer).toMatchObject({ label: "RAG · Indexer", status: "online", module: "system_agents.document_indexer_agent" });
    expect(rows.filter((r) => r.agentId === "document-indexer-agent")).toHaveLength(1);
  });

  it("adds discovered agents once, deduplicated by agent id", () => {
    const rows = mergeCatalog([], [
      discoveredRow({ agent_id: "unit-converter", module: "agents.unit_converter", tools: [{ name: "convert" }] }),
      discoveredRow({ agent_id: "unit-converter", module: "agents.other" }),
    ]);
    const found = rows.filter((r) => r.agentId === "unit-converter");
    expect(found).toHaveLength(1);
    expect(found[0]?.module).toBe("agents.unit_converter");
  });
});

describe("filterCatalog", () => {
  const rows = mergeCatalog([weather, demo], []);
  it("matches ids, labels and tool names, all words", () => {
    expect(filterCatalog(rows, "rag").map((r) => r.agentId)).toEqual(["document-extractor-agent", "document-indexer-agent"]);
    expect(filterCatalog(rows, "get_weather").map((r) => r.agentId)).toEqual(["weather-agent"]);
    expect(filterCatalog(rows, "rag search").map((r) => r.agentId)).toEqual(["document-indexer-agent"]);
    expect(filterCatalog(rows, "  ")).toHaveLength(rows.length);
  });
});

describe("startCommand", () => {
  it("is the python -m line with the master's WebSocket URL", () => {
    expect(startCommand({ agentId: "x", module: "system_agents.document_indexer_agent" }, "ws://127.0.0.1:8000/ws")).toBe(
      "MASTER_WS=ws://127.0.0.1:8000/ws PYTHONPATH=. python -m system_agents.document_indexer_agent",
    );
    expect(startCommand({ agentId: "x", handler: "agents.conv:handle" }, "ws://h/ws")).toContain("python -m agents.conv");
  });
});
