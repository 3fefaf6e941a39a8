/**
 * The canvas slice: the nodes and edges, the undo/redo history of their snapshots, linking
 * agents to the orchestrator (registering HTTP agents, starting or deploying WebSocket ones,
 * with a note per agent), and the workspace YAML export and import.
 */
import { applyEdgeChanges, applyNodeChanges, type Connection, type Edge, type EdgeChange, type NodeChange, type XYPosition } from "@xyflow/react";
import { isRunning, startCommand } from "../lib/agents";
import {
  agentNode,
  agentNodeId,
  baseEdges,
  baseNodes,
  hasLink,
  isAgentNode,
  linkEdge,
  linkedAgentOf,
  removeNodes,
  ringPositions,
  type AppNode,
} from "../lib/graph";
import { emptyHistory, record, redo, undo, type History } from "../lib/history";
import { deployableModule } from "../lib/sandbox";
import { canvasToWorkspace, exportWorkspace, parseWorkspace, startWorkspace, workspaceEntries, workspaceToCanvas, type CanvasSnapshot } from "../lib/workspace";
import { baseOf, messageOf, wsUrlOf, type SliceCreator } from "./runtime";

export interface LinkNote {
  kind: "registered" | "start" | "starting" | "started" | "deploying" | "deployed" | "stopping" | "stopped" | "error";
  text: string;
}

export interface CanvasSlice {
  nodes: AppNode[];
  edges: Edge[];
  history: History<CanvasSnapshot>;
  linkNotes: Record<string, LinkNote>;

  onNodesChange(changes: NodeChange<AppNode>[]): void;
  onEdgesChange(changes: EdgeChange[]): void;
  onConnect(connection: Connection): void;
  onDelete(params: { nodes: AppNode[]; edges: Edge[] }): void;
  /** Record the canvas before an edit (a drag, or any change made through the slice). */
  beginDrag(): void;
  addAgent(agentId: string, position?: XYPosition): void;
  link(agentId: string): Promise<void>;
  unlink(agentId: string): void;
  /** Run a discovered WebSocket agent inside the master (`POST /internal/yaml-agents/start`). */
  startInMaster(agentId: string): Promise<void>;
  setLinkNote(agentId: string, note: LinkNote): void;
  deleteSelected(): void;
  undo(): void;
  redo(): void;

  exportYaml(): string;
  importYaml(text: string): boolean;
}

export const createCanvasSlice: SliceCreator<CanvasSlice> = (set, get) => {
  const snapshot = (): CanvasSnapshot => ({ nodes: get().nodes, edges: get().edges });
  const remember = () => set({ history: record(get().history, snapshot()) });

  async function register(agentId: string) {
    const entry = get().catalogById[agentId]!;
    const api = get().api;
    const note = (value: LinkNote) => get().setLinkNote(agentId, value);
    if (!api) return;
    if (!get().canRegister()) {
      // POST /register would be refused (403): a registered agent is simply linked, another is named.
      if (!isRunning(entry.status)) note({ kind: "error", text: "Not registered: registering an agent needs a key with the role agent or admin" });
      return;
    }
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
      const message = messageOf(error);
      note({ kind: "error", text: message });
      get().notify("error", `Registering ${agentId} failed: ${message}`);
    }
  }

  return {
    nodes: baseNodes(),
    edges: baseEdges(),
    history: emptyHistory(),
    linkNotes: {},

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
      if (entry.transport === "invocation") return register(agentId);
      if (isRunning(entry.status)) return;
      if (entry.transport === "mcp" || entry.transport === "a2a") {
        // The master calls these: they are registered (POST /register), not started.
        const how =
          entry.transport === "mcp"
            ? "register it with POST /register (mcp_url, mcp_headers), or restore the workspace with openagent workspace restore and its header variables set"
            : "register it with POST /register (a2a_url)";
        get().setLinkNote(agentId, { kind: "error", text: `Not reachable by the master: ${how}` });
        return;
      }
      if (get().sandboxEnabled && api && get().isAdmin() && deployableModule(entry)) {
        // With the sandbox on, linking a stopped agent deploys it: the same path as the sidebar's Deploy.
        // One already deployed (its Pod starting or failing) is left alone: Deploy replaces it on purpose.
        if (entry.sandbox) get().setLinkNote(agentId, { kind: "deployed", text: "Deployed to the sandbox; waiting for it to connect" });
        else await get().deploy(agentId);
        return;
      }
      get().setLinkNote(agentId, { kind: "start", text: startCommand(entry, wsUrlOf(get().baseUrl)) });
    },

    unlink(agentId) {
      if (!hasLink(get().edges, agentId)) return;
      remember();
      set({ edges: get().edges.filter((e) => linkedAgentOf(e) !== agentId) });
    },

    async startInMaster(agentId) {
      const { api, baseUrl } = get();
      const entry = get().catalogById[agentId];
      const note = (value: LinkNote) => get().setLinkNote(agentId, value);
      if (!api || !entry) return;
      const base = baseOf(baseUrl);
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
        const message = messageOf(error);
        note({ kind: "error", text: message });
        get().notify("error", `Starting ${agentId} in the master failed: ${message}`);
      }
    },

    setLinkNote(agentId, note) {
      set({ linkNotes: { ...get().linkNotes, [agentId]: note } });
    },

    undo() {
      const step = undo(get().history, snapshot());
      if (step) set({ history: step.history, nodes: step.snapshot.nodes, edges: step.snapshot.edges });
    },
    redo() {
      const step = redo(get().history, snapshot());
      if (step) set({ history: step.history, nodes: step.snapshot.nodes, edges: step.snapshot.edges });
    },

    exportYaml() {
      const base = baseOf(get().baseUrl);
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
      get().setCatalog({ workspaceRows: workspaceEntries(workspace) });
      set({ nodes: canvas.nodes, edges: canvas.edges });
      const agents = canvas.nodes.filter(isAgentNode).length;
      get().notify("info", `Imported a workspace with ${agents} agent(s)`);
      return true;
    },
  };
};
