/**
 * The sidebar's catalog of agents: what the master reports (`GET /agents`), what it can
 * start (`GET /agents/discover`), the two RAG system agents that are always listed after
 * connecting, and agents that came from an imported workspace. Pure functions only.
 */

import type { AgentRow, DiscoveredAgent, SandboxField, ToolSchema } from "../api/types";
import { sandboxFieldOf } from "./sandbox";

export type Transport = "websocket" | "invocation" | "mcp" | "a2a";

/** How each transport is named in the agent list, the details panel and on canvas nodes. */
export const TRANSPORT_LABEL: Record<Transport, string> = {
  websocket: "WebSocket",
  invocation: "HTTP",
  mcp: "MCP",
  a2a: "A2A",
};

const TRANSPORTS = new Set<string>(Object.keys(TRANSPORT_LABEL));

/** The transport of a `GET /agents` row's `connection_type` (a sandbox row is a WebSocket agent not yet connected). */
export function transportOf(connectionType: string | null | undefined): Transport {
  return connectionType && TRANSPORTS.has(connectionType) ? (connectionType as Transport) : "websocket";
}
/** `online`: a connected WebSocket agent; UP/DOWN/UNKNOWN: an HTTP agent's last health check; `offline`: known but not running. */
export type AgentStatus = "online" | "UP" | "DOWN" | "UNKNOWN" | "offline";

/** A tool of an agent (the master's `ToolSchema`). */
export type ToolInfo = ToolSchema;
/** A row of `GET /agents` (generated from the master's OpenAPI document). */
export type { AgentRow };
/** A row of `GET /agents/discover`'s `agents` (generated). */
export type DiscoveredRow = DiscoveredAgent;

export type CatalogSource = "master" | "discover" | "builtin" | "workspace";

export interface CatalogEntry {
  agentId: string;
  label: string;
  transport: Transport;
  role: "action" | "query";
  source: CatalogSource;
  status: AgentStatus;
  tools: ToolInfo[];
  /** Python module that runs the agent (`system_agents.document_indexer_agent`). */
  module?: string;
  /** `module` or `module:function`, as the workspace schema's `handler`. */
  handler?: string;
  invocationBaseUrl?: string;
  /** An MCP server's endpoint (`mcp_url`) or an A2A agent's card URL (`a2a_url`). */
  remoteUrl?: string;
  /** An MCP agent's headers from a workspace: references such as `Bearer ${MCP_TOKEN}`, never values. */
  mcpHeaders?: Record<string, string>;
  /** An A2A agent's headers from a workspace: references, never values. */
  a2aHeaders?: Record<string, string>;
  lastCheck?: number | null;
  lastError?: string | null;
  metadata?: Record<string, unknown>;
  /** Discovery could not analyse the agent's file. */
  discoverError?: string;
  /** Deployed by the Kubernetes sandbox: its Pod's status (`GET /agents`' `sandbox` field). */
  sandbox?: SandboxField;
}

/** Always listed after connecting, even when `GET /agents` is empty (spec, Web UI). */
export const RAG_ROWS: readonly CatalogEntry[] = [
  {
    agentId: "document-extractor-agent",
    label: "RAG · Extractor",
    transport: "websocket",
    role: "action",
    source: "builtin",
    status: "offline",
    tools: [{ name: "extract_document", description: "Extract text chunks from an attached document." }],
    module: "system_agents.document_extractor_agent",
    handler: "system_agents.document_extractor_agent",
  },
  {
    agentId: "document-indexer-agent",
    label: "RAG · Indexer",
    transport: "websocket",
    role: "action",
    source: "builtin",
    status: "offline",
    tools: [
      { name: "index_document", description: "Index document chunks for search." },
      { name: "search_knowledge", description: "Search the indexed documents." },
    ],
    module: "system_agents.document_indexer_agent",
    handler: "system_agents.document_indexer_agent",
  },
];

function liveStatus(row: AgentRow): AgentStatus {
  if (row.connection_type === "websocket") return "online";
  if (row.connection_type === "sandbox") return "offline"; // deployed, not (yet) connected
  if (row.status === "UP" || row.status === "DOWN" || row.status === "UNKNOWN") return row.status;
  return "UNKNOWN";
}

export function fromAgentRow(row: AgentRow): CatalogEntry {
  const entry: CatalogEntry = {
    agentId: row.agent_id,
    label: row.agent_id,
    transport: transportOf(row.connection_type),
    role: row.role === "query" ? "query" : "action",
    source: "master",
    status: liveStatus(row),
    tools: row.tools ?? [],
    lastCheck: row.last_check ?? null,
    lastError: row.last_error ?? null,
    metadata: row.metadata ?? {},
  };
  if (row.invocation_base_url) entry.invocationBaseUrl = row.invocation_base_url;
  const remoteUrl = row.mcp_url ?? row.a2a_url;
  if (remoteUrl) entry.remoteUrl = remoteUrl;
  const sandbox = sandboxFieldOf(row.sandbox);
  if (sandbox) entry.sandbox = sandbox;
  return entry;
}

export function fromDiscoveredRow(row: DiscoveredRow): CatalogEntry {
  const handler = row.handler ?? row.module;
  const entry: CatalogEntry = {
    agentId: row.agent_id,
    label: row.agent_id,
    transport: row.transport === "invocation" ? "invocation" : "websocket",
    role: "action",
    source: "discover",
    status: "offline",
    tools: row.tools ?? [],
  };
  if (row.module) entry.module = row.module;
  if (handler) entry.handler = handler;
  return entry;
}

/**
 * One row per agent id, in sidebar order: live agents (sorted), then discovered and
 * built-in rows not running, then workspace rows. A live row keeps the module and label
 * that discovery or the built-in list knew for the same id.
 */
export function mergeCatalog(
  live: readonly AgentRow[],
  discovered: readonly DiscoveredRow[],
  workspace: readonly CatalogEntry[] = [],
  builtin: readonly CatalogEntry[] = RAG_ROWS,
): CatalogEntry[] {
  const known = new Map<string, CatalogEntry>();
  for (const entry of [...builtin, ...discovered.map(fromDiscoveredRow), ...workspace]) {
    if (!known.has(entry.agentId)) known.set(entry.agentId, entry);
  }
  const rows: CatalogEntry[] = [];
  const liveIds = new Set<string>();
  for (const row of [...live].sort((a, b) => a.agent_id.localeCompare(b.agent_id))) {
    if (row.role === "query") continue; // query clients are not canvas agents
    const entry = fromAgentRow(row);
    const offline = known.get(row.agent_id);
    if (offline) {
      entry.label = offline.label;
      if (offline.module) entry.module = offline.module;
      if (offline.handler) entry.handler = offline.handler;
    }
    rows.push(entry);
    liveIds.add(row.agent_id);
  }
  for (const entry of known.values()) if (!liveIds.has(entry.agentId)) rows.push(entry);
  return rows;
}

/** Case-insensitive search over id, label, module and tool names. */
export function filterCatalog(entries: readonly CatalogEntry[], search: string): CatalogEntry[] {
  const words = search.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return [...entries];
  return entries.filter((entry) => {
    const text = [entry.agentId, entry.label, entry.module ?? "", ...entry.tools.map((t) => t.name)]
      .join(" ")
      .toLowerCase();
    return words.every((word) => text.includes(word));
  });
}

/** How to start a WebSocket agent locally (shown when it is linked but not running). */
export function startCommand(entry: Pick<CatalogEntry, "module" | "handler" | "agentId">, masterWs: string): string {
  const module = entry.module ?? entry.handler?.split(":")[0];
  if (!module) return `# no module known for ${entry.agentId}: start it with the SDK against ${masterWs}`;
  return `MASTER_WS=${masterWs} PYTHONPATH=. python -m ${module}`;
}

export function isRunning(status: AgentStatus): boolean {
  return status === "online" || status === "UP";
}
