/**
 * Workspace YAML, schema version 2 (version 1 files load too): the shape of `openagent/workspace/`
 * (`docs/workspace.schema.json`), so the UI's exports restore on a master and the master's
 * exports load here.
 *
 * Exports are byte-stable (agents sorted by id, links sorted, layout sorted, numbers rounded),
 * never carry secrets (credential-named metadata keys, credential-looking values and URL
 * credentials are dropped) and never include the built-in query client, which is injected
 * on load. Imports refuse unknown fields and name the line and field of each problem.
 */
import type { Edge, Viewport, XYPosition } from "@xyflow/react";
import { LineCounter, isMap, parseDocument, stringify, type Node as YamlNode } from "yaml";
import type { CatalogEntry, ToolInfo } from "./agents";
import {
  ORCHESTRATOR_ID,
  QUERY_CLIENT_ID,
  agentIdOf,
  agentNode,
  baseEdges,
  baseNodes,
  isAgentNode,
  linkEdge,
  linkedAgentIds,
  ringPositions,
  type AppNode,
} from "./graph";

export const SCHEMA_VERSION = 2;
/** The versions this UI reads (2 added MCP servers and A2A agents, `transport: mcp` and `a2a`). */
export const READ_VERSIONS: readonly number[] = [1, 2];
export const HEADER = `# OpenAgent workspace, schema version ${SCHEMA_VERSION} (docs/workspace.schema.json)\n`;
export const MAX_YAML_BYTES = 1024 * 1024;
const AGENT_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const URL_PATTERN = /^https?:\/\/[^\s/]+(\/\S*)?$/;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/;
/** A header value in a workspace: a reference to an environment variable, never the secret. */
export const SECRET_REFERENCE = /^([A-Za-z][A-Za-z0-9-]{0,31} )?\$\{[A-Za-z_][A-Za-z0-9_]{0,127}\}$/;
const HANDLER = /^(agents|system_agents|sample_agents)(\.[A-Za-z_][A-Za-z0-9_]*)+(:[A-Za-z_][A-Za-z0-9_]*)?$/;

export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  endpoint?: string;
}

export interface AgentSpec {
  agent_id: string;
  role?: "action" | "query";
  transport: "websocket" | "invocation" | "mcp" | "a2a";
  invocation_base_url?: string;
  mcp_url?: string;
  /** Header name → `${VAR}` reference (optionally after a scheme: `Bearer ${VAR}`). */
  mcp_headers?: Record<string, string>;
  a2a_url?: string;
  /** As `mcp_headers`, for an A2A agent. */
  a2a_headers?: Record<string, string>;
  handler?: string;
  tools: ToolSpec[];
  metadata?: Record<string, unknown>;
}

export interface Workspace {
  version: typeof SCHEMA_VERSION;
  master: { base_url: string; ws_url: string };
  agents: AgentSpec[];
  links: { source: string; target: string }[];
  layout: { nodes: Record<string, { x: number; y: number }>; viewport?: { x: number; y: number; zoom: number } };
}

export interface CanvasSnapshot {
  nodes: AppNode[];
  edges: Edge[];
}

// ------------------------------------------------------------------ secrets

const SECRET_SUFFIXES = [
  "apikey", "token", "secret", "password", "passwd", "credential", "credentials",
  "authorization", "privatekey", "accesskey", "secretkey", "cookie",
];
const SECRET_NAMES = new Set(["auth", "key", "bearer", "pwd"]);
const SECRET_VALUE = /^(sk-[A-Za-z0-9_-]{16,}|bearer\s+\S+|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-\S+|AKIA[0-9A-Z]{16})$/i;

export function isSecretName(name: string): boolean {
  const flat = name.toLowerCase().replace(/[^a-z0-9]/g, "");
  return SECRET_NAMES.has(flat) || SECRET_SUFFIXES.some((suffix) => flat.endsWith(suffix));
}

const looksSecret = (value: unknown): boolean => typeof value === "string" && SECRET_VALUE.test(value.trim());

/** The URL without user name, password or credential-named query parameters. */
export function scrubUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  parsed.username = "";
  parsed.password = "";
  for (const key of [...parsed.searchParams.keys()]) if (isSecretName(key)) parsed.searchParams.delete(key);
  let text = parsed.toString();
  // URL adds a "/" to a bare origin; keep the user's form.
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/]+\//i.test(url) && text.endsWith("/") && parsed.pathname === "/") text = text.slice(0, -1);
  return text;
}

function redact(value: unknown): unknown {
  if (Array.isArray(value)) return value.filter((v) => !looksSecret(v)).map(redact);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, inner] of Object.entries(value)) {
      if (!isSecretName(key) && !looksSecret(inner)) out[key] = redact(inner);
    }
    return out;
  }
  if (typeof value === "string" && /^[a-z][a-z0-9+.-]*:\/\//i.test(value)) return scrubUrl(value);
  return value;
}

// ------------------------------------------------------------------ export

function num(value: number): number {
  if (!Number.isFinite(value)) return 0;
  return Math.round(value * 1000) / 1000;
}

function toolSpec(tool: ToolInfo): ToolSpec {
  const spec: ToolSpec = {
    name: tool.name,
    description: tool.description ?? "",
    parameters: tool.parameters ?? { type: "object", properties: {} },
  };
  if (tool.endpoint) spec.endpoint = tool.endpoint;
  return spec;
}

/** Only references are ever kept (GET /agents never shows header values; imports refuse values). */
function headerReferences(headers: Record<string, string> | undefined): Record<string, string> | undefined {
  const kept = Object.entries(headers ?? {}).filter(([, value]) => SECRET_REFERENCE.test(value));
  return kept.length > 0 ? Object.fromEntries(kept.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : undefined;
}

export function agentSpec(entry: CatalogEntry): AgentSpec {
  // Key order as openagent/workspace/export.py writes it, so both exports are byte-identical.
  const spec = { agent_id: entry.agentId } as AgentSpec;
  if (entry.role === "query") spec.role = "query";
  spec.transport = entry.transport;
  if (entry.transport === "invocation" && entry.invocationBaseUrl) spec.invocation_base_url = scrubUrl(entry.invocationBaseUrl);
  if (entry.transport === "mcp" && entry.remoteUrl) spec.mcp_url = scrubUrl(entry.remoteUrl);
  const mcpHeaders = headerReferences(entry.mcpHeaders);
  if (entry.transport === "mcp" && mcpHeaders) spec.mcp_headers = mcpHeaders;
  if (entry.transport === "a2a" && entry.remoteUrl) spec.a2a_url = scrubUrl(entry.remoteUrl);
  const a2aHeaders = headerReferences(entry.a2aHeaders);
  if (entry.transport === "a2a" && a2aHeaders) spec.a2a_headers = a2aHeaders;
  const handler = entry.handler ?? entry.module;
  if (handler && HANDLER.test(handler)) spec.handler = handler;
  spec.tools = entry.tools.map(toolSpec);
  const metadata = redact(entry.metadata ?? {}) as Record<string, unknown>;
  if (Object.keys(metadata).length > 0) spec.metadata = metadata;
  return spec;
}

/** The canvas as a workspace document (plain data, sorted, secret-free, no query client). */
export function canvasToWorkspace(
  canvas: CanvasSnapshot,
  entries: ReadonlyMap<string, CatalogEntry>,
  master: { baseUrl: string; wsUrl: string },
  viewport?: Viewport,
): Workspace {
  const agents: AgentSpec[] = [];
  const nodes: Record<string, { x: number; y: number }> = {};
  const layoutIds: [string, XYPosition][] = [];
  for (const node of canvas.nodes) {
    if (node.id === ORCHESTRATOR_ID) layoutIds.push([ORCHESTRATOR_ID, node.position]);
    if (!isAgentNode(node)) continue;
    const entry = entries.get(node.data.agentId);
    agents.push(
      entry ? agentSpec(entry) : { agent_id: node.data.agentId, transport: "websocket", tools: [] },
    );
    layoutIds.push([node.data.agentId, node.position]);
  }
  agents.sort((a, b) => (a.agent_id < b.agent_id ? -1 : a.agent_id > b.agent_id ? 1 : 0));
  layoutIds.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [id, position] of layoutIds) nodes[id] = { x: num(position.x), y: num(position.y) };
  const workspace: Workspace = {
    version: SCHEMA_VERSION,
    master: { base_url: scrubUrl(master.baseUrl), ws_url: scrubUrl(master.wsUrl) },
    agents,
    links: linkedAgentIds(canvas.edges).map((agentId) => ({ source: agentId, target: ORCHESTRATOR_ID })),
    layout: { nodes },
  };
  if (viewport) workspace.layout.viewport = { x: num(viewport.x), y: num(viewport.y), zoom: num(viewport.zoom) };
  return workspace;
}

/**
 * A workspace of one WebSocket agent, linked to the orchestrator: what `POST
 * /internal/yaml-agents/start` needs to run it inside the master. `null` when the agent has no
 * runnable handler module (`agents.…`, `system_agents.…`, `sample_agents.…`) or is not a
 * WebSocket action agent.
 */
export function startWorkspace(entry: CatalogEntry, master: { baseUrl: string; wsUrl: string }): Workspace | null {
  const spec = agentSpec(entry);
  if (spec.transport !== "websocket" || spec.role === "query" || !spec.handler) return null;
  return {
    version: SCHEMA_VERSION,
    master: { base_url: scrubUrl(master.baseUrl), ws_url: scrubUrl(master.wsUrl) },
    agents: [spec],
    links: [{ source: spec.agent_id, target: ORCHESTRATOR_ID }],
    layout: { nodes: {} },
  };
}

/** The workspace as stable YAML: the same workspace always gives the same bytes. */
export function exportWorkspace(workspace: Workspace): string {
  return HEADER + stringify(workspace, { indentSeq: false, lineWidth: 100, aliasDuplicateObjects: false });
}

// ------------------------------------------------------------------ import

export class WorkspaceError extends Error {
  constructor(readonly problems: { message: string; line?: number; field?: string }[]) {
    super(
      problems
        .map((p) => `${p.line !== undefined ? `line ${p.line}: ` : ""}${p.field ? `${p.field}: ` : ""}${p.message}`)
        .join("\n"),
    );
    this.name = "WorkspaceError";
  }
}

type Path = (string | number)[];
const fieldPath = (path: Path) => path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? p : `.${p}`)).join("");

class Checker {
  readonly problems: { message: string; line?: number; field?: string }[] = [];
  constructor(
    private readonly doc: ReturnType<typeof parseDocument>,
    private readonly lines: LineCounter,
  ) {}

  line(path: Path, key = false): number | undefined {
    let node: unknown = this.doc.getIn(path, true);
    if (key && path.length > 0) {
      const parent = this.doc.getIn(path.slice(0, -1), true);
      if (isMap(parent)) {
        const pair = parent.items.find((item) => (item.key as { value?: unknown } | null)?.value === path[path.length - 1]);
        node = pair?.key ?? node;
      }
    }
    const range = (node as YamlNode | undefined)?.range;
    return range ? this.lines.linePos(range[0]).line : undefined;
  }

  fail(path: Path, message: string, key = false): void {
    const problem: { message: string; line?: number; field?: string } = { message };
    const line = this.line(path, key);
    if (line !== undefined) problem.line = line;
    if (path.length) problem.field = fieldPath(path);
    this.problems.push(problem);
  }

  object(value: unknown, path: Path, allowed: readonly string[]): value is Record<string, unknown> {
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      this.fail(path, "must be a mapping");
      return false;
    }
    for (const key of Object.keys(value)) {
      if (!allowed.includes(key)) this.fail([...path, key], `unknown field '${key}'`, true);
    }
    return true;
  }

  string(value: unknown, path: Path, pattern?: RegExp): value is string {
    if (typeof value !== "string") {
      this.fail(path, "must be a string");
      return false;
    }
    if (pattern && !pattern.test(value)) {
      this.fail(path, `'${value}' does not match ${pattern.source}`);
      return false;
    }
    return true;
  }

  number(value: unknown, path: Path): value is number {
    if (typeof value !== "number" || !Number.isFinite(value)) {
      this.fail(path, "must be a number");
      return false;
    }
    return true;
  }
}

function checkWorkspace(data: unknown, c: Checker): void {
  if (!c.object(data, [], ["version", "master", "agents", "links", "layout"])) return;
  if (data.version !== undefined && !READ_VERSIONS.includes(data.version as number)) {
    c.fail(["version"], `unsupported workspace version ${JSON.stringify(data.version)}; this UI reads versions ${READ_VERSIONS.join(", ")}`);
  }
  if (data.master !== undefined && c.object(data.master, ["master"], ["base_url", "ws_url"])) {
    if (data.master.base_url !== undefined) c.string(data.master.base_url, ["master", "base_url"], /^https?:\/\/\S+$/);
    if (data.master.ws_url !== undefined) c.string(data.master.ws_url, ["master", "ws_url"], /^wss?:\/\/\S+$/);
  }
  const ids: string[] = [];
  if (data.agents !== undefined) {
    if (!Array.isArray(data.agents)) c.fail(["agents"], "must be a list");
    else
      data.agents.forEach((agent: unknown, i: number) => {
        const path = ["agents", i];
        if (!c.object(agent, path, ["agent_id", "role", "transport", "invocation_base_url", "mcp_url", "mcp_headers", "a2a_url", "a2a_headers", "handler", "tools", "metadata", "builtin"])) return;
        if (c.string(agent.agent_id, [...path, "agent_id"], AGENT_ID)) {
          if (ids.includes(agent.agent_id)) c.fail([...path, "agent_id"], `duplicate agent id '${agent.agent_id}'`);
          if (agent.agent_id === ORCHESTRATOR_ID) c.fail([...path, "agent_id"], "'orchestrator' is the orchestrator's node id; rename the agent");
          ids.push(agent.agent_id);
        }
        if (agent.role !== undefined && agent.role !== "action" && agent.role !== "query") c.fail([...path, "role"], "must be 'action' or 'query'");
        const transport = agent.transport ?? "websocket";
        if (!["websocket", "invocation", "mcp", "a2a"].includes(transport as string)) c.fail([...path, "transport"], "must be 'websocket', 'invocation', 'mcp' or 'a2a'");
        if (agent.invocation_base_url !== undefined) c.string(agent.invocation_base_url, [...path, "invocation_base_url"], URL_PATTERN);
        if (transport === "invocation" && agent.invocation_base_url === undefined) c.fail(path, "transport 'invocation' needs invocation_base_url");
        if (transport !== "invocation" && agent.invocation_base_url !== undefined) c.fail([...path, "invocation_base_url"], "is only for transport 'invocation'");
        for (const remote of ["mcp", "a2a"] as const) {
          const url = agent[`${remote}_url`];
          const headers = agent[`${remote}_headers`];
          if (url !== undefined) c.string(url, [...path, `${remote}_url`], URL_PATTERN);
          if (transport === remote && url === undefined) c.fail(path, `transport '${remote}' needs ${remote}_url`);
          if (transport !== remote && (url !== undefined || headers !== undefined)) c.fail(path, `${remote}_url and ${remote}_headers are only for transport '${remote}'`);
          if (headers !== undefined && c.object(headers, [...path, `${remote}_headers`], Object.keys(headers ?? {}))) {
            for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
              const hpath = [...path, `${remote}_headers`, name];
              if (!HEADER_NAME.test(name)) c.fail(hpath, "is not a header name");
              // Never repeat the value: it may be the very secret that must not be here.
              else if (typeof value !== "string" || !SECRET_REFERENCE.test(value)) {
                c.fail(hpath, "must refer to an environment variable, e.g. '${MCP_TOKEN}' or 'Bearer ${MCP_TOKEN}'; a workspace never holds the secret itself");
              }
            }
          }
        }
        if (agent.handler !== undefined && agent.handler !== null) c.string(agent.handler, [...path, "handler"], HANDLER);
        if (agent.metadata !== undefined) c.object(agent.metadata, [...path, "metadata"], Object.keys(agent.metadata ?? {}));
        if (agent.tools !== undefined) {
          if (!Array.isArray(agent.tools)) c.fail([...path, "tools"], "must be a list");
          else
            agent.tools.forEach((tool: unknown, j: number) => {
              const tpath = [...path, "tools", j];
              if (!c.object(tool, tpath, ["name", "description", "parameters", "endpoint", "requires_approval"])) return;
              c.string(tool.name, [...tpath, "name"], TOOL_NAME);
              if (tool.description !== undefined) c.string(tool.description, [...tpath, "description"]);
              if (tool.parameters !== undefined) c.object(tool.parameters, [...tpath, "parameters"], Object.keys(tool.parameters ?? {}));
              if (tool.endpoint !== undefined && tool.endpoint !== null) c.string(tool.endpoint, [...tpath, "endpoint"]);
              if (tool.requires_approval !== undefined && tool.requires_approval !== null && typeof tool.requires_approval !== "boolean")
                c.fail([...tpath, "requires_approval"], "must be true or false");
            });
        }
      });
  }
  const known = new Set([...ids, ORCHESTRATOR_ID, QUERY_CLIENT_ID]);
  if (data.links !== undefined) {
    if (!Array.isArray(data.links)) c.fail(["links"], "must be a list");
    else
      data.links.forEach((link: unknown, i: number) => {
        const path = ["links", i];
        if (!c.object(link, path, ["source", "target"])) return;
        for (const end of ["source", "target"] as const) {
          const value = link[end] ?? (end === "target" ? ORCHESTRATOR_ID : undefined);
          if (c.string(value, [...path, end], AGENT_ID) && !known.has(value)) c.fail([...path, end], `names unknown node '${value}'`);
        }
      });
  }
  if (data.layout !== undefined && c.object(data.layout, ["layout"], ["nodes", "viewport"])) {
    const nodes = data.layout.nodes;
    if (nodes !== undefined && c.object(nodes, ["layout", "nodes"], Object.keys(nodes ?? {}))) {
      for (const [id, pos] of Object.entries(nodes)) {
        const path = ["layout", "nodes", id];
        if (!c.object(pos, path, ["x", "y"])) continue;
        if (pos.x !== undefined) c.number(pos.x, [...path, "x"]);
        if (pos.y !== undefined) c.number(pos.y, [...path, "y"]);
      }
    }
    const view = data.layout.viewport;
    if (view !== undefined && view !== null && c.object(view, ["layout", "viewport"], ["x", "y", "zoom"])) {
      for (const k of ["x", "y", "zoom"] as const) if (view[k] !== undefined) c.number(view[k], ["layout", "viewport", k]);
    }
  }
}

/** Parse and validate a workspace YAML. Throws {@link WorkspaceError} naming lines and fields. */
export function parseWorkspace(text: string): Workspace {
  if (new TextEncoder().encode(text).length > MAX_YAML_BYTES) {
    throw new WorkspaceError([{ message: `the workspace is larger than ${MAX_YAML_BYTES} bytes` }]);
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new WorkspaceError(doc.errors.map((e) => ({ message: e.message.split("\n")[0] ?? e.message, line: e.linePos?.[0].line ?? 0 })));
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 }) ?? {};
  } catch (error) {
    throw new WorkspaceError([{ message: `refused: ${(error as Error).message}` }]);
  }
  const checker = new Checker(doc, lines);
  checkWorkspace(data, checker);
  if (checker.problems.length > 0) throw new WorkspaceError(checker.problems);
  const raw = data as Omit<Partial<Workspace>, "agents"> & { agents?: (AgentSpec & { builtin?: boolean })[] };
  return {
    version: SCHEMA_VERSION,
    master: { base_url: raw.master?.base_url ?? "http://127.0.0.1:8000", ws_url: raw.master?.ws_url ?? "ws://127.0.0.1:8000/ws" },
    agents: (raw.agents ?? [])
      .filter((a) => !a.builtin && a.agent_id !== QUERY_CLIENT_ID)
      .map(({ builtin: _builtin, ...a }) => ({ ...a, transport: a.transport ?? "websocket", tools: (a.tools ?? []).map(toolSpec) })),
    links: (raw.links ?? []).map((l) => ({ source: l.source, target: l.target ?? ORCHESTRATOR_ID })),
    layout: { nodes: raw.layout?.nodes ?? {}, ...(raw.layout?.viewport ? { viewport: raw.layout.viewport } : {}) },
  };
}

/** Catalog rows for a workspace's agents (shown as "workspace" rows until the master lists them). */
export function workspaceEntries(workspace: Workspace): CatalogEntry[] {
  return workspace.agents.map((agent) => {
    const entry: CatalogEntry = {
      agentId: agent.agent_id,
      label: agent.agent_id,
      transport: agent.transport,
      role: agent.role ?? "action",
      source: "workspace",
      status: "offline",
      tools: agent.tools,
      metadata: agent.metadata ?? {},
    };
    if (agent.invocation_base_url) entry.invocationBaseUrl = agent.invocation_base_url;
    if (agent.mcp_url) entry.remoteUrl = agent.mcp_url;
    if (agent.mcp_headers) entry.mcpHeaders = { ...agent.mcp_headers };
    if (agent.a2a_url) entry.remoteUrl = agent.a2a_url;
    if (agent.a2a_headers) entry.a2aHeaders = { ...agent.a2a_headers };
    if (agent.handler) {
      entry.handler = agent.handler;
      entry.module = agent.handler.split(":")[0] ?? agent.handler;
    }
    return entry;
  });
}

/** The canvas a workspace describes; the query client is injected, agents without a position are laid out. */
export function workspaceToCanvas(workspace: Workspace): CanvasSnapshot & { viewport?: Viewport } {
  const nodes = baseNodes();
  const orchestrator = workspace.layout.nodes[ORCHESTRATOR_ID];
  if (orchestrator) nodes[0]!.position = { x: orchestrator.x, y: orchestrator.y };
  const placed = workspace.agents.filter((a) => workspace.layout.nodes[a.agent_id]);
  const unplaced = workspace.agents.filter((a) => !workspace.layout.nodes[a.agent_id]);
  const taken = [...nodes.map((n) => n.position), ...placed.map((a) => workspace.layout.nodes[a.agent_id]!)];
  const free = ringPositions(unplaced.length, taken);
  for (const agent of placed) nodes.push(agentNode(agent.agent_id, { ...workspace.layout.nodes[agent.agent_id]! }));
  unplaced.forEach((agent, i) => nodes.push(agentNode(agent.agent_id, free[i] ?? { x: 0, y: 0 })));
  const edges = baseEdges();
  const linked = new Set<string>();
  for (const link of workspace.links) {
    const other = link.target === ORCHESTRATOR_ID ? link.source : link.source === ORCHESTRATOR_ID ? link.target : null;
    if (other && other !== QUERY_CLIENT_ID && !linked.has(other)) {
      linked.add(other);
      edges.push(linkEdge(other));
    }
  }
  const result: CanvasSnapshot & { viewport?: Viewport } = { nodes, edges };
  if (workspace.layout.viewport) result.viewport = workspace.layout.viewport;
  return result;
}

/** Node ids of agents in a canvas, for comparisons. */
export function agentIdsOf(nodes: readonly AppNode[]): string[] {
  return nodes.map((n) => agentIdOf(n.id)).filter((id): id is string => id !== null).sort();
}
