/**
 * The page's one store (Zustand), built by {@link createAppStore} and provided through
 * React context (store/context.tsx). It owns the connection, the agent catalog, the canvas
 * (with undo/redo), the chat transcript, the glow of nodes and the notices. I/O goes
 * through an injected {@link ApiClient} factory, so tests run it against a fake master.
 */
import { applyEdgeChanges, applyNodeChanges, type Connection, type Edge, type EdgeChange, type NodeChange, type XYPosition } from "@xyflow/react";
import { createStore, type StoreApi } from "zustand";
import { ApiError, createApiClient, type ApiClient, type FetchLike, type Health } from "../api/client";
import type { Attachment, PlanStep, PromptProfile, QueryRequest, QueryResponse } from "../api/types";
import {
  isRunning,
  mergeCatalog,
  startCommand,
  type AgentRow,
  type AgentStatus,
  type CatalogEntry,
  type DiscoveredRow,
} from "../lib/agents";
import {
  applyEvent,
  attachmentFailure,
  attachmentLimitsOf,
  buildQuery,
  curlCommand,
  finishEntry,
  glowTargets,
  newAssistantEntry,
  type AssistantEntry,
  type ChatEntry,
  type SessionFile,
  sessionFiles,
} from "../lib/chat";
import {
  agentNode,
  agentNodeId,
  baseEdges,
  baseNodes,
  hasLink,
  isAgentNode,
  linkEdge,
  linkedAgentIds,
  linkedAgentOf,
  removeNodes,
  ringPositions,
  type AppNode,
} from "../lib/graph";
import {
  EMPTY_FORM,
  formProblem,
  generateBody,
  generatedFrom,
  generationFailure,
  moduleNameProblem,
  restoreSummary,
  type BuilderForm,
  type DiscoveryProblem,
  type Generated,
  type GeneratorModels,
  type RestoreOutcome,
  type Saved,
} from "../lib/builder";
import { emptyHistory, record, redo, undo, type History } from "../lib/history";
import { deployableModule, startBody } from "../lib/sandbox";
import {
  canvasToWorkspace,
  exportWorkspace,
  parseWorkspace,
  startWorkspace,
  workspaceEntries,
  workspaceToCanvas,
  type CanvasSnapshot,
} from "../lib/workspace";

export const GLOW_FADE_MS = 4000;
export const CALL_LOG_LIMIT = 20;
const STORAGE_KEY = "openagent.ui.connection";

export type ConnectionState = "disconnected" | "connecting" | "connected" | "error";

export interface Notice {
  id: number;
  level: "error" | "warning" | "info";
  text: string;
  /** Offer a retry of the connection. */
  retry?: boolean;
}

export interface Glow {
  phase: "active" | "fading";
  seq: number;
}

export interface CallLogEntry {
  callId: string | null;
  toolName: string;
  arguments: unknown;
  state: "running" | "ok" | "error";
  result?: unknown;
  error?: string;
  at: number;
}

export interface LinkNote {
  kind: "registered" | "start" | "starting" | "started" | "deploying" | "deployed" | "stopping" | "stopped" | "error";
  text: string;
}

/** The agent builder panel: describe, generate, read the code and checks, name, save. */
export interface BuilderState {
  open: boolean;
  form: BuilderForm;
  /** `GET /generate-agent/models`; `null` until loaded. */
  models: GeneratorModels | null;
  /** Why generating is impossible on this master (403 with the generator off, no LLM). */
  unavailable: string | null;
  phase: "idle" | "loading" | "generating" | "saving";
  /** The code and its checks (a 422 with failed checks keeps its code here too). */
  generated: Generated | null;
  /** The module name to save as (editable). */
  module: string;
  /** The last failure, with the master's message. */
  error: { status: number; message: string } | null;
  /** The master refused to replace an existing file: its message, until the user decides. */
  confirmOverwrite: string | null;
  /** The last save, and the agent id discovery lists for it (`null` when it is not listed). */
  saved: (Saved & { agentId: string | null }) | null;
}

/** "Restore on master" and its per-agent outcome. */
export interface RestoreState {
  open: boolean;
  phase: "idle" | "running" | "done" | "error";
  outcomes: RestoreOutcome[];
  error: string | null;
}

/** The sandbox log dialog: `GET /internal/sandbox-agent/logs` of one agent. */
export interface SandboxLogsState {
  open: boolean;
  agentId: string | null;
  phase: "idle" | "loading" | "done" | "error";
  lines: string[];
  podName: string | null;
  /** The master's message when the request failed (403 sandbox off, 503 no cluster, 404 not deployed). */
  error: string | null;
}

export const LOG_TAIL_LINES = 200;

export interface AppState {
  baseUrl: string;
  apiKey: string;
  connection: ConnectionState;
  connectionError: string | null;
  /** The master stopped answering after a successful connect. */
  lost: boolean;
  health: Health | null;
  lastRefresh: number | null;
  api: ApiClient | null;
  sandboxEnabled: boolean;
  discoveryAvailable: boolean;

  liveRows: AgentRow[];
  discovered: DiscoveredRow[];
  /** `GET /agents/discover`'s per-file errors. */
  discoveryErrors: DiscoveryProblem[];
  workspaceRows: CatalogEntry[];
  catalog: CatalogEntry[];
  catalogById: Record<string, CatalogEntry>;
  search: string;

  nodes: AppNode[];
  edges: Edge[];
  history: History<CanvasSnapshot>;
  linkNotes: Record<string, LinkNote>;
  glow: Record<string, Glow>;
  callLogs: Record<string, CallLogEntry[]>;

  transcript: ChatEntry[];
  sessionId: string | null;
  busy: boolean;
  models: string[];
  model: string | null;
  profiles: PromptProfile[];
  profile: PromptProfile;
  autoMode: boolean;
  requirePlan: boolean;
  lastQuery: QueryRequest | null;
  maxAttachmentBytes: number;
  maxAttachments: number;
  /** The master's refusal of the last query's attachments (413/400, naming the file). */
  attachmentError: string | null;
  /** The session's attached files (`GET /query/session-rag-context`). */
  sessionFiles: SessionFile[];

  builder: BuilderState;
  restore: RestoreState;
  sandboxLogs: SandboxLogsState;

  notices: Notice[];

  connect(baseUrl: string, apiKey: string): Promise<boolean>;
  disconnect(): void;
  refresh(): Promise<void>;
  setSearch(search: string): void;

  onNodesChange(changes: NodeChange<AppNode>[]): void;
  onEdgesChange(changes: EdgeChange[]): void;
  onConnect(connection: Connection): void;
  onDelete(params: { nodes: AppNode[]; edges: Edge[] }): void;
  beginDrag(): void;
  addAgent(agentId: string, position?: XYPosition): void;
  link(agentId: string): Promise<void>;
  unlink(agentId: string): void;
  /** Run a discovered WebSocket agent inside the master (`POST /internal/yaml-agents/start`). */
  startInMaster(agentId: string): Promise<void>;
  /**
   * Deploy a WebSocket agent's module to the Kubernetes sandbox (`POST /internal/sandbox-agent/start`,
   * placement `new_pod`): the sidebar's "Deploy", and what linking a stopped agent does with the sandbox on.
   */
  deploy(agentId: string): Promise<boolean>;
  /** `POST /internal/sandbox-agent/stop`: tear down the agent's sandbox deployment. */
  stopDeployment(agentId: string): Promise<void>;
  /** Open the log dialog and load the agent's sandbox log tail. */
  openSandboxLogs(agentId: string): Promise<void>;
  closeSandboxLogs(): void;
  deleteSelected(): void;
  undo(): void;
  redo(): void;

  setModel(model: string | null): void;
  setProfile(profile: PromptProfile): void;
  setAutoMode(on: boolean): void;
  setRequirePlan(on: boolean): void;
  /** Ask; `false` when the master refused the attachments (the composer keeps the files). */
  send(text: string, attachments?: Attachment[]): Promise<boolean>;
  setAttachmentError(message: string | null): void;
  loadSessionFiles(): Promise<void>;
  executePlan(entryId: string, steps: PlanStep[]): Promise<void>;
  discardPlan(entryId: string): void;
  newSession(): Promise<void>;
  curl(): string | null;

  exportYaml(): string;
  importYaml(text: string): boolean;
  /** `POST /internal/workspace/restore` with the canvas's workspace YAML. */
  restoreOnMaster(): Promise<void>;
  closeRestore(): void;

  openBuilder(): Promise<void>;
  closeBuilder(): void;
  setBuilderForm(change: Partial<BuilderForm>): void;
  setBuilderModule(module: string): void;
  generateAgent(): Promise<void>;
  /** Save the generated code; `overwrite` after the user confirmed replacing the file. */
  saveAgent(overwrite?: boolean): Promise<void>;
  cancelOverwrite(): void;

  notify(level: Notice["level"], text: string, retry?: boolean): void;
  dismiss(id: number): void;
}

export interface StoreOptions {
  fetch?: FetchLike;
  storage?: Pick<Storage, "getItem" | "setItem" | "removeItem"> | null;
  /** Milliseconds between `GET /agents` refreshes; 0 turns polling off. */
  pollMs?: number;
  /** Refresh discovery every this many polls. */
  discoverEvery?: number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
  now?: () => number;
  defaultBaseUrl?: string;
}

export type AppStore = StoreApi<AppState>;

function wsUrlOf(baseUrl: string): string {
  const base = baseUrl || (typeof window !== "undefined" ? window.location.origin : "http://127.0.0.1:8000");
  return `${base.replace(/^http/, "ws").replace(/\/+$/, "")}/ws`;
}

export function createAppStore(options: StoreOptions = {}): AppStore {
  const setTimer = options.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
  const clearTimer = options.clearTimer ?? ((h) => clearTimeout(h as ReturnType<typeof setTimeout>));
  const now = options.now ?? (() => Date.now());
  const storage = options.storage === undefined ? (typeof sessionStorage !== "undefined" ? sessionStorage : null) : options.storage;
  const pollMs = options.pollMs ?? 3000;
  const discoverEvery = options.discoverEvery ?? 10;
  let poll: unknown = null;
  let polls = 0;
  let noticeId = 0;
  let glowSeq = 0;
  let entryId = 0;
  const glowTimers = new Map<string, unknown>();

  const initialBuilder: BuilderState = {
    open: false,
    form: EMPTY_FORM,
    models: null,
    unavailable: null,
    phase: "idle",
    generated: null,
    module: "",
    error: null,
    confirmOverwrite: null,
    saved: null,
  };

  const saved = (() => {
    try {
      const raw = storage?.getItem(STORAGE_KEY);
      return raw ? (JSON.parse(raw) as { baseUrl?: string; apiKey?: string }) : {};
    } catch {
      return {};
    }
  })();

  return createStore<AppState>()((set, get) => {
    const snapshot = (): CanvasSnapshot => ({ nodes: get().nodes, edges: get().edges });
    const remember = () => set({ history: record(get().history, snapshot()) });

    function setCatalog(partial: Partial<Pick<AppState, "liveRows" | "discovered" | "workspaceRows">>) {
      const state = { ...get(), ...partial };
      const catalog = mergeCatalog(state.liveRows, state.discovered, state.workspaceRows);
      const before = get().catalogById;
      const catalogById = Object.fromEntries(catalog.map((entry) => [entry.agentId, entry]));
      // An agent on the canvas going DOWN is an error the user must see.
      for (const agentId of linkedAgentIds(get().edges)) {
        const was: AgentStatus | undefined = before[agentId]?.status;
        const entry = catalogById[agentId];
        if (entry?.status === "DOWN" && was !== "DOWN" && was !== undefined) {
          get().notify("error", `Agent ${agentId} is DOWN${entry.lastError ? `: ${entry.lastError}` : ""}`);
        }
      }
      set({ ...partial, catalog, catalogById });
    }

    function setBuilder(change: Partial<BuilderState>) {
      set({ builder: { ...get().builder, ...change } });
    }

    function setDiscovery(found: { agents: DiscoveredRow[]; errors: DiscoveryProblem[] }) {
      set({ discoveryErrors: found.errors });
      setCatalog({ discovered: found.agents });
    }

    const failureOf = (error: unknown) => ({
      status: error instanceof ApiError ? error.status : 0,
      message: error instanceof Error ? error.message : String(error),
    });

    function stopPolling() {
      if (poll !== null) clearTimer(poll);
      poll = null;
    }

    function schedulePoll() {
      stopPolling();
      if (pollMs <= 0) return;
      poll = setTimer(async () => {
        poll = null;
        if (get().connection !== "connected") return;
        await get().refresh();
        if (get().connection === "connected") schedulePoll();
      }, get().lost ? Math.min(pollMs * 2, 10000) : pollMs);
    }

    function glow(nodeId: string, phase: Glow["phase"]) {
      const seq = ++glowSeq;
      set({ glow: { ...get().glow, [nodeId]: { phase, seq } } });
      const old = glowTimers.get(nodeId);
      if (old !== undefined) clearTimer(old);
      glowTimers.delete(nodeId);
      if (phase === "fading") {
        glowTimers.set(
          nodeId,
          setTimer(() => {
            glowTimers.delete(nodeId);
            if (get().glow[nodeId]?.seq !== seq) return;
            const { [nodeId]: _gone, ...rest } = get().glow;
            set({ glow: rest });
          }, GLOW_FADE_MS),
        );
      }
    }

    function logCall(agentId: string, data: Record<string, unknown>, event: string) {
      const logs = get().callLogs[agentId] ?? [];
      const callId = typeof data.call_id === "string" ? data.call_id : null;
      const toolName = String(data.tool_name ?? "?");
      let next: CallLogEntry[];
      if (event === "tool_call") {
        next = [...logs, { callId, toolName, arguments: data.arguments ?? {}, state: "running", at: now() }];
      } else {
        let index = -1;
        for (let i = logs.length - 1; i >= 0; i--) {
          const l = logs[i]!;
          if ((callId !== null && l.callId === callId) || (l.state === "running" && l.toolName === toolName)) {
            index = i;
            break;
          }
        }
        const done: Partial<CallLogEntry> = data.success
          ? { state: "ok", result: data.result }
          : { state: "error", error: String(data.error ?? "failed") };
        next =
          index === -1
            ? [...logs, { callId, toolName, arguments: data.arguments ?? {}, at: now(), ...done } as CallLogEntry]
            : logs.map((l, i) => (i === index ? { ...l, ...done } : l));
      }
      set({ callLogs: { ...get().callLogs, [agentId]: next.slice(-CALL_LOG_LIMIT) } });
    }

    function updateEntry(id: string, change: (entry: AssistantEntry) => AssistantEntry) {
      set({
        transcript: get().transcript.map((e) => (e.kind === "assistant" && e.id === id ? change(e) : e)),
      });
    }

    /** Run one query into `entry`; `false` when the master refused its attachments. */
    async function runQuery(body: QueryRequest, entry: AssistantEntry): Promise<boolean> {
      const api = get().api;
      if (!api) {
        get().notify("error", "Not connected: connect to a master first");
        return true;
      }
      set({ busy: true, lastQuery: body, transcript: [...get().transcript, entry] });
      try {
        const result: QueryResponse = await api.query(body, {
          onEvent(event, data) {
            updateEntry(entry.id, (e) => applyEvent(e, event, data));
            const agentId = typeof data.agent_id === "string" ? data.agent_id : null;
            if (agentId && (event === "tool_call" || event === "tool_result")) {
              logCall(agentId, data, event);
              glow(agentNodeId(agentId), event === "tool_call" ? "active" : "fading");
            }
          },
        });
        updateEntry(entry.id, (e) => (e.state === "streaming" ? finishEntry(e, result) : e));
        if (result.session_id) set({ sessionId: result.session_id });
        for (const nodeId of glowTargets(result)) glow(nodeId, "fading");
        if (!result.success) {
          const refused = attachmentFailure(result.error_code, undefined, result.error ?? "the attachments were refused");
          if (refused) set({ attachmentError: refused });
          get().notify("error", refused ?? result.error ?? "the query failed");
          return refused === null;
        }
        return true;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        const status = error instanceof ApiError ? error.status : undefined;
        const refused = error instanceof ApiError ? attachmentFailure(error.code, error.status, message) : null;
        if (refused) set({ attachmentError: refused });
        updateEntry(entry.id, (e) => ({
          ...e,
          state: "error",
          error: message,
          ...(status !== undefined ? { httpStatus: status } : {}),
          steps: e.steps.map((s) => (s.state === "running" ? { ...s, state: "error" as const, error: "interrupted" } : s)),
        }));
        for (const [nodeId, g] of Object.entries(get().glow)) if (g.phase === "active") glow(nodeId, "fading");
        get().notify("error", message, error instanceof ApiError && error.lostConnection);
        return refused === null;
      } finally {
        set({ busy: false });
      }
    }

    return {
      baseUrl: saved.baseUrl ?? options.defaultBaseUrl ?? "",
      apiKey: saved.apiKey ?? "",
      connection: "disconnected",
      connectionError: null,
      lost: false,
      health: null,
      lastRefresh: null,
      api: null,
      sandboxEnabled: false,
      discoveryAvailable: false,

      liveRows: [],
      discovered: [],
      discoveryErrors: [],
      workspaceRows: [],
      catalog: [],
      catalogById: {},
      search: "",

      nodes: baseNodes(),
      edges: baseEdges(),
      history: emptyHistory(),
      linkNotes: {},
      glow: {},
      callLogs: {},

      transcript: [],
      sessionId: null,
      busy: false,
      models: [],
      model: null,
      profiles: ["default", "auto_multi", "reasoning"],
      profile: "default",
      autoMode: false,
      requirePlan: false,
      lastQuery: null,
      maxAttachmentBytes: 2 * 1024 * 1024,
      maxAttachments: 5,
      attachmentError: null,
      sessionFiles: [],

      builder: initialBuilder,
      restore: { open: false, phase: "idle", outcomes: [], error: null },
      sandboxLogs: { open: false, agentId: null, phase: "idle", lines: [], podName: null, error: null },

      notices: [],

      async connect(baseUrl, apiKey) {
        stopPolling();
        const fetchOption = options.fetch ? { fetch: options.fetch } : {};
        const api = createApiClient({ baseUrl, apiKey, ...fetchOption });
        set({ baseUrl, apiKey, connection: "connecting", connectionError: null, api: null, lost: false });
        try {
          storage?.setItem(STORAGE_KEY, JSON.stringify({ baseUrl, apiKey }));
        } catch {
          /* storage full or blocked: the key is simply not kept */
        }
        try {
          const health = await api.health();
          const rows = await api.agents(); // the first authenticated call: 401 shows here
          const [models, discovered, sandbox] = await Promise.all([
            api.models().catch(() => null),
            api.discover().catch(() => null),
            api.sandboxStatus().catch(() => null),
          ]);
          const allowed = (models?.allowed_models as string[] | undefined) ?? [];
          const profiles = (models?.prompt_profiles as PromptProfile[] | undefined) ?? get().profiles;
          const defaultModel = (models?.default_model as string | undefined) ?? allowed[0] ?? null;
          const limits = attachmentLimitsOf(models);
          set({
            api,
            health,
            connection: "connected",
            lastRefresh: now(),
            models: allowed,
            model: get().model && allowed.includes(get().model!) ? get().model : defaultModel,
            profiles,
            ...(limits ? { maxAttachmentBytes: limits.maxBytes, maxAttachments: limits.maxCount } : {}),
            sandboxEnabled: Boolean(sandbox?.enabled),
            discoveryAvailable: discovered !== null,
            discoveryErrors: discovered?.errors ?? [],
          });
          setCatalog({ liveRows: rows, discovered: discovered?.agents ?? [] });
          polls = 0;
          schedulePoll();
          return true;
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          set({ connection: "error", connectionError: message });
          return false;
        }
      },

      disconnect() {
        stopPolling();
        try {
          storage?.removeItem(STORAGE_KEY);
        } catch {
          /* ignore */
        }
        set({
          api: null,
          connection: "disconnected",
          apiKey: "",
          lost: false,
          liveRows: [],
          health: null,
          discoveryErrors: [],
          builder: { ...get().builder, models: null, unavailable: null },
        });
        setCatalog({ liveRows: [], discovered: [] });
      },

      async refresh() {
        const api = get().api;
        if (!api) return;
        try {
          polls += 1;
          const rows = await api.agents();
          const discovered = polls % discoverEvery === 0 ? await api.discover().catch(() => null) : null;
          const wasLost = get().lost;
          set({ lost: false, lastRefresh: now() });
          if (wasLost) {
            set({ health: await api.health().catch(() => get().health) });
            get().notify("info", "Reconnected to the master");
          }
          if (discovered !== null) set({ discoveryErrors: discovered.errors });
          setCatalog(discovered !== null ? { liveRows: rows, discovered: discovered.agents } : { liveRows: rows });
        } catch (error) {
          if (error instanceof ApiError && error.lostConnection) {
            if (!get().lost) get().notify("error", error.message, true);
            set({ lost: true });
          } else if (error instanceof ApiError && error.status === 401) {
            stopPolling();
            set({ connection: "error", connectionError: error.message });
          }
        }
        if (get().connection === "connected" && poll === null) schedulePoll();
      },

      setSearch: (search) => set({ search }),

      onNodesChange(changes) {
        const kept = changes.filter((c) => c.type !== "remove"); // removal goes through onDelete (one undo step)
        if (kept.length) set({ nodes: applyNodeChanges(kept, get().nodes) });
      },
      onEdgesChange(changes) {
        const kept = changes.filter((c) => c.type !== "remove");
        if (kept.length) set({ edges: applyEdgeChanges(kept, get().edges) });
      },
      onDelete({ nodes, edges }) {
        if (nodes.length === 0 && edges.length === 0) return;
        remember();
        const removed = removeNodes(get().nodes, get().edges, new Set(nodes.map((n) => n.id)));
        const edgeIds = new Set(edges.filter((e) => e.deletable !== false).map((e) => e.id));
        set({ nodes: removed.nodes, edges: removed.edges.filter((e) => !edgeIds.has(e.id)) });
      },
      deleteSelected() {
        const nodes = get().nodes.filter((n) => n.selected && n.deletable !== false);
        const edges = get().edges.filter((e) => e.selected && e.deletable !== false);
        get().onDelete({ nodes, edges });
      },
      beginDrag: remember,
      onConnect(connection) {
        const agentId = linkedAgentOf(connection);
        if (agentId === null) {
          get().notify("warning", "Link an agent to the orchestrator (agent ↔ orchestrator links only)");
          return;
        }
        void get().link(agentId);
      },

      addAgent(agentId, position) {
        const id = agentNodeId(agentId);
        if (get().nodes.some((n) => n.id === id)) {
          set({ nodes: get().nodes.map((n) => ({ ...n, selected: n.id === id })) });
          return;
        }
        remember();
        const where = position ?? ringPositions(1, get().nodes.map((n) => n.position))[0] ?? { x: 300, y: 0 };
        set({ nodes: [...get().nodes.map((n) => ({ ...n, selected: false })), { ...agentNode(agentId, where), selected: true }] });
      },

      async link(agentId) {
        if (!get().nodes.some((n) => n.id === agentNodeId(agentId))) get().addAgent(agentId);
        if (!hasLink(get().edges, agentId)) {
          remember();
          set({ edges: [...get().edges, linkEdge(agentId)] });
        }
        const entry = get().catalogById[agentId];
        const api = get().api;
        if (!entry) return;
        const note = (value: LinkNote) => set({ linkNotes: { ...get().linkNotes, [agentId]: value } });
        if (entry.transport === "invocation") {
          if (!api) return;
          if (!entry.invocationBaseUrl || entry.tools.length === 0) {
            note({ kind: "error", text: "Cannot register: no invocation_base_url or tools known for this agent" });
            return;
          }
          try {
            const body = {
              agent_id: agentId,
              invocation_base_url: entry.invocationBaseUrl,
              tools: entry.tools.map((t) => ({
                name: t.name,
                description: t.description ?? "",
                parameters: t.parameters ?? { type: "object", properties: {} },
                ...(t.endpoint ? { endpoint: t.endpoint } : {}),
              })),
              metadata: entry.metadata ?? {},
            };
            const answer = await api.register(body);
            note({ kind: "registered", text: `Registered with the master (status ${String(answer.status ?? "?")})` });
            await get().refresh();
          } catch (error) {
            const message = error instanceof Error ? error.message : String(error);
            note({ kind: "error", text: message });
            get().notify("error", `Registering ${agentId} failed: ${message}`);
          }
          return;
        }
        if (isRunning(entry.status)) return;
        if (get().sandboxEnabled && api && deployableModule(entry)) {
          // With the sandbox on, linking a stopped agent deploys it: the same path as the sidebar's Deploy.
          // One already deployed (its Pod starting or failing) is left alone: Deploy replaces it on purpose.
          if (entry.sandbox) note({ kind: "deployed", text: "Deployed to the sandbox; waiting for it to connect" });
          else await get().deploy(agentId);
          return;
        }
        note({ kind: "start", text: startCommand(entry, wsUrlOf(get().baseUrl)) });
      },

      async deploy(agentId) {
        const api = get().api;
        const entry = get().catalogById[agentId];
        const note = (value: LinkNote) => set({ linkNotes: { ...get().linkNotes, [agentId]: value } });
        if (!api || !entry) return false;
        const module = deployableModule(entry);
        if (!module) {
          note({ kind: "error", text: "Cannot deploy: no agents/ or system_agents/ module known for this WebSocket agent" });
          return false;
        }
        note({ kind: "deploying", text: "Deploying to the sandbox…" });
        try {
          const answer = await api.sandboxStart(startBody(agentId, module));
          const pod = typeof answer.pod_name === "string" ? ` (Pod ${answer.pod_name})` : "";
          note({ kind: "deployed", text: `Deployed to the sandbox${pod}; waiting for it to connect` });
          await get().refresh();
          return true;
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          note({ kind: "error", text: message });
          get().notify("error", `Deploying ${agentId} failed: ${message}`);
          return false;
        }
      },

      async stopDeployment(agentId) {
        const api = get().api;
        const note = (value: LinkNote) => set({ linkNotes: { ...get().linkNotes, [agentId]: value } });
        if (!api) return;
        note({ kind: "stopping", text: "Stopping its sandbox deployment…" });
        try {
          await api.sandboxStop(agentId);
          note({ kind: "stopped", text: "Stopped: its sandbox Pod was removed" });
          await get().refresh();
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          note({ kind: "error", text: message });
          get().notify("error", `Stopping ${agentId} failed: ${message}`);
        }
      },

      async openSandboxLogs(agentId) {
        const api = get().api;
        set({ sandboxLogs: { open: true, agentId, phase: "loading", lines: [], podName: null, error: null } });
        if (!api) {
          set({ sandboxLogs: { ...get().sandboxLogs, phase: "error", error: "Not connected: connect to a master first" } });
          return;
        }
        try {
          const logs = await api.sandboxLogs(agentId, LOG_TAIL_LINES);
          if (get().sandboxLogs.agentId !== agentId) return;
          set({ sandboxLogs: { open: get().sandboxLogs.open, agentId, phase: "done", lines: logs.lines, podName: logs.pod_name ?? null, error: null } });
        } catch (error) {
          if (get().sandboxLogs.agentId !== agentId) return;
          set({ sandboxLogs: { ...get().sandboxLogs, phase: "error", error: failureOf(error).message } });
        }
      },
      closeSandboxLogs() {
        set({ sandboxLogs: { ...get().sandboxLogs, open: false } });
      },

      async startInMaster(agentId) {
        const { api, baseUrl } = get();
        const entry = get().catalogById[agentId];
        const note = (value: LinkNote) => set({ linkNotes: { ...get().linkNotes, [agentId]: value } });
        if (!api || !entry) return;
        const base = baseUrl || (typeof window !== "undefined" ? window.location.origin : "http://127.0.0.1:8000");
        const workspace = startWorkspace(entry, { baseUrl: base, wsUrl: wsUrlOf(base) });
        if (!workspace) {
          note({ kind: "error", text: "Cannot start it in the master: no agents/, system_agents/ or sample_agents/ module known for it" });
          return;
        }
        note({ kind: "starting", text: "Starting it in the master…" });
        try {
          const outcomes = await api.startYamlAgents(exportWorkspace(workspace));
          const outcome = outcomes.find((o) => o.agent_id === agentId);
          if (outcome && (outcome.status === "started" || outcome.status === "already_running")) {
            const how = outcome.status === "started" ? "Started" : "Already running";
            note({ kind: "started", text: `${how} in the master (${outcome.handler ?? workspace.agents[0]!.handler})` });
            await get().refresh();
          } else {
            const why = outcome ? `${outcome.status}${outcome.reason ? `: ${outcome.reason}` : ""}` : "the master did not report it";
            note({ kind: "error", text: `Not started: ${why}` });
            get().notify("error", `Starting ${agentId} in the master failed: ${why}`);
          }
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          note({ kind: "error", text: message });
          get().notify("error", `Starting ${agentId} in the master failed: ${message}`);
        }
      },

      unlink(agentId) {
        if (!hasLink(get().edges, agentId)) return;
        remember();
        set({ edges: get().edges.filter((e) => linkedAgentOf(e) !== agentId) });
      },

      undo() {
        const step = undo(get().history, snapshot());
        if (step) set({ history: step.history, nodes: step.snapshot.nodes, edges: step.snapshot.edges });
      },
      redo() {
        const step = redo(get().history, snapshot());
        if (step) set({ history: step.history, nodes: step.snapshot.nodes, edges: step.snapshot.edges });
      },

      setModel: (model) => set({ model }),
      setProfile: (profile) => set({ profile }),
      setAutoMode: (autoMode) => set({ autoMode }),
      setRequirePlan: (requirePlan) => set({ requirePlan }),

      async send(text, attachments) {
        const state = get();
        if (state.busy || !text.trim()) return true;
        set({ attachmentError: null });
        const body = buildQuery({
          text,
          sessionId: state.sessionId,
          allowedAgentIds: linkedAgentIds(state.edges),
          model: state.model,
          profile: state.profile,
          autoMode: state.autoMode,
          requirePlanApproval: state.requirePlan,
          ...(attachments ? { attachments } : {}),
        });
        const id = `e${++entryId}`;
        set({
          transcript: [...state.transcript, { kind: "user", id: `u${id}`, text, attachments: (attachments ?? []).map((a) => a.filename) }],
        });
        const accepted = await runQuery(body, newAssistantEntry(id));
        if (accepted && (attachments?.length || get().sessionFiles.length)) await get().loadSessionFiles();
        return accepted;
      },

      setAttachmentError: (attachmentError) => set({ attachmentError }),

      async loadSessionFiles() {
        const { api, sessionId } = get();
        if (!api || !sessionId) return;
        try {
          const files = sessionFiles(await api.sessionRagContext(sessionId));
          if (get().sessionId === sessionId) set({ sessionFiles: files });
        } catch (error) {
          get().notify("warning", `Could not list the session's files: ${(error as Error).message}`);
        }
      },

      async executePlan(planEntryId, steps) {
        const state = get();
        const planEntry = state.transcript.find((e) => e.kind === "assistant" && e.id === planEntryId) as AssistantEntry | undefined;
        if (!planEntry?.plan || state.busy) return;
        updateEntry(planEntryId, (e) => ({ ...e, planState: "running" }));
        const body = buildQuery({
          text: "Execute the approved plan.",
          sessionId: state.sessionId,
          allowedAgentIds: linkedAgentIds(state.edges),
          model: state.model,
          profile: state.profile,
          autoMode: true,
          requirePlanApproval: false,
          execute: { planId: planEntry.plan.plan_id, steps },
        });
        await runQuery(body, newAssistantEntry(`e${++entryId}`));
        const last = get().transcript[get().transcript.length - 1];
        const ok = last?.kind === "assistant" && last.state === "done";
        updateEntry(planEntryId, (e) => ({ ...e, planState: ok ? "executed" : "pending" }));
      },

      discardPlan(planEntryId) {
        updateEntry(planEntryId, (e) => ({ ...e, planState: "discarded" }));
      },

      async newSession() {
        const { api, sessionId } = get();
        set({ transcript: [], sessionId: null, lastQuery: null, sessionFiles: [], attachmentError: null });
        if (api && sessionId) {
          try {
            await api.deleteSession(sessionId);
          } catch (error) {
            get().notify("warning", `The server-side session was not deleted: ${(error as Error).message}`);
          }
        }
      },

      curl() {
        const { lastQuery, api, baseUrl } = get();
        if (!lastQuery) return null;
        const base = baseUrl || (typeof window !== "undefined" ? window.location.origin : "");
        return curlCommand(base, lastQuery, api?.hasKey ?? get().apiKey !== "");
      },

      exportYaml() {
        const base = get().baseUrl || (typeof window !== "undefined" ? window.location.origin : "http://127.0.0.1:8000");
        const entries = new Map(Object.entries(get().catalogById));
        return exportWorkspace(canvasToWorkspace(snapshot(), entries, { baseUrl: base, wsUrl: wsUrlOf(base) }));
      },

      importYaml(text) {
        let workspace;
        try {
          workspace = parseWorkspace(text);
        } catch (error) {
          get().notify("error", `Import failed:\n${(error as Error).message}`);
          return false;
        }
        remember();
        const canvas = workspaceToCanvas(workspace);
        setCatalog({ workspaceRows: workspaceEntries(workspace) });
        set({ nodes: canvas.nodes, edges: canvas.edges });
        const agents = canvas.nodes.filter(isAgentNode).length;
        get().notify("info", `Imported a workspace with ${agents} agent(s)`);
        return true;
      },

      async restoreOnMaster() {
        const api = get().api;
        if (!api) {
          set({ restore: { open: true, phase: "error", outcomes: [], error: "Not connected: connect to a master first" } });
          return;
        }
        set({ restore: { open: true, phase: "running", outcomes: [], error: null } });
        try {
          const outcomes = await api.restoreWorkspace(get().exportYaml());
          set({ restore: { open: true, phase: "done", outcomes, error: null } });
          get().notify("info", `Restore on master: ${restoreSummary(outcomes)}`);
          await get().refresh();
        } catch (error) {
          const { message } = failureOf(error);
          set({ restore: { open: true, phase: "error", outcomes: [], error: message } });
        }
      },
      closeRestore() {
        set({ restore: { ...get().restore, open: false } });
      },

      async openBuilder() {
        setBuilder({ open: true });
        const api = get().api;
        if (!api) {
          setBuilder({ unavailable: "Connect to a master to generate agents" });
          return;
        }
        if (get().builder.phase !== "idle") return;
        setBuilder({ phase: "loading" });
        try {
          const models = await api.generatorModels();
          const form = get().builder.form;
          const model = form.model && models.allowed_models.includes(form.model) ? form.model : models.default_model;
          setBuilder({
            models,
            form: { ...form, model },
            unavailable: models.available ? null : "The master has no LLM configured: generating answers 503",
          });
        } catch (error) {
          const failure = failureOf(error);
          // 403: OPENAGENT_AGENT_GENERATOR=0. The panel says so instead of offering a form that cannot work.
          setBuilder(failure.status === 403 ? { unavailable: failure.message } : { error: failure });
        } finally {
          setBuilder({ phase: "idle" });
        }
      },
      closeBuilder() {
        setBuilder({ open: false });
      },
      setBuilderForm(change) {
        setBuilder({ form: { ...get().builder.form, ...change } });
      },
      setBuilderModule(module) {
        setBuilder({ module, confirmOverwrite: null });
      },

      async generateAgent() {
        const { api, builder } = get();
        if (builder.phase !== "idle") return;
        const problem = formProblem(builder.form);
        if (problem) {
          setBuilder({ error: { status: 0, message: problem } });
          return;
        }
        if (!api) {
          setBuilder({ error: { status: 0, message: "Not connected: connect to a master first" } });
          return;
        }
        setBuilder({ phase: "generating", error: null, generated: null, saved: null, confirmOverwrite: null });
        try {
          const generated = generatedFrom(await api.generateAgent(generateBody(builder.form)));
          setBuilder({ generated, module: generated.module });
        } catch (error) {
          const failure = failureOf(error);
          const failed = error instanceof ApiError && error.status === 422 ? generationFailure(error.body) : null;
          if (failed?.generated) setBuilder({ generated: failed.generated, module: failed.generated.module });
          if (failure.status === 403) setBuilder({ unavailable: failure.message });
          setBuilder({ error: failure });
        } finally {
          setBuilder({ phase: "idle" });
        }
      },

      async saveAgent(overwrite = false) {
        const { api, builder } = get();
        if (builder.phase !== "idle" || !builder.generated) return;
        const problem = moduleNameProblem(builder.module);
        if (problem) {
          setBuilder({ error: { status: 0, message: `Module name: ${problem}` } });
          return;
        }
        if (!api) {
          setBuilder({ error: { status: 0, message: "Not connected: connect to a master first" } });
          return;
        }
        setBuilder({ phase: "saving", error: null, confirmOverwrite: null, saved: null });
        try {
          const saved = await api.saveAgent({ module: builder.module, source: builder.generated.source, overwrite });
          // The saved module is listed by discovery at once, ready to drag from the sidebar.
          const found = await api.discover().catch(() => null);
          if (found) setDiscovery(found);
          const row = found?.agents.find((a) => a.handler === saved.handler || a.module === saved.handler);
          setBuilder({ saved: { module: saved.module, file: saved.file, handler: saved.handler, agentId: row?.agent_id ?? null } });
          const problemRow = found?.errors.find((e) => e.file === saved.file);
          if (row) get().notify("info", `Saved ${saved.file}: ${row.agent_id} is listed in the sidebar, ready to drag`);
          else if (problemRow) get().notify("warning", `Saved ${saved.file}, but discovery cannot list it: ${problemRow.error}`);
        } catch (error) {
          if (error instanceof ApiError && error.status === 400 && error.code === "file_exists") {
            setBuilder({ confirmOverwrite: error.message });
          } else {
            setBuilder({ error: failureOf(error) });
          }
        } finally {
          setBuilder({ phase: "idle" });
        }
      },
      cancelOverwrite() {
        setBuilder({ confirmOverwrite: null });
      },

      notify(level, text, retry) {
        const notice: Notice = { id: ++noticeId, level, text, ...(retry ? { retry } : {}) };
        set({ notices: [...get().notices.slice(-4), notice] });
      },
      dismiss(id) {
        set({ notices: get().notices.filter((n) => n.id !== id) });
      },
    };
  });
}
