/**
 * The sandbox slice: deploying a WebSocket agent's module to the Kubernetes sandbox, stopping
 * the deployment, and the log dialog (`GET /internal/sandbox-agent/logs` of one agent).
 */
import { startBody, deployableModule } from "../lib/sandbox";
import { failureOf, messageOf, type SliceCreator } from "./runtime";

export const LOG_TAIL_LINES = 200;

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

export interface SandboxSlice {
  sandboxLogs: SandboxLogsState;

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
}

export const createSandboxSlice: SliceCreator<SandboxSlice> = (set, get) => ({
  sandboxLogs: { open: false, agentId: null, phase: "idle", lines: [], podName: null, error: null },

  async deploy(agentId) {
    const api = get().api;
    const entry = get().catalogById[agentId];
    const note = get().setLinkNote.bind(null, agentId);
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
      const message = messageOf(error);
      note({ kind: "error", text: message });
      get().notify("error", `Deploying ${agentId} failed: ${message}`);
      return false;
    }
  },

  async stopDeployment(agentId) {
    const api = get().api;
    const note = get().setLinkNote.bind(null, agentId);
    if (!api) return;
    note({ kind: "stopping", text: "Stopping its sandbox deployment…" });
    try {
      await api.sandboxStop(agentId);
      note({ kind: "stopped", text: "Stopped: its sandbox Pod was removed" });
      await get().refresh();
    } catch (error) {
      const message = messageOf(error);
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
});
