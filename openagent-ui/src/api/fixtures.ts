/**
 * Complete API rows from partial ones, for tests: the generated types require every field the
 * master always sends, and a test names only those it is about.
 */
import type { AgentRow, DiscoveredAgent } from "./types";

/** A `GET /agents` row: an online WebSocket action agent without tools, unless told otherwise. */
export function agentRow(row: Partial<AgentRow> & { agent_id: string }): AgentRow {
  return { role: "action", connection_type: "websocket", status: "online", tools: [], ...row };
}

/** A `GET /agents/discover` row: a WebSocket agent of `agents/`, unless told otherwise. */
export function discoveredRow(row: Partial<DiscoveredAgent> & { agent_id: string; module: string }): DiscoveredAgent {
  return {
    transport: "websocket",
    tools: [],
    handler: row.module,
    file: `${row.module.replace(/\./g, "/")}.py`,
    ...row,
  };
}
