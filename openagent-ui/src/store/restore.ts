/**
 * The restore slice: "Restore on master" sends the canvas's workspace YAML to
 * `POST /internal/workspace/restore` and keeps each agent's outcome for the dialog.
 */
import { restoreSummary, type RestoreOutcome } from "../lib/builder";
import { failureOf, type SliceCreator } from "./runtime";

/** "Restore on master" and its per-agent outcome. */
export interface RestoreState {
  open: boolean;
  phase: "idle" | "running" | "done" | "error";
  outcomes: RestoreOutcome[];
  error: string | null;
}

export interface RestoreSlice {
  restore: RestoreState;

  /** `POST /internal/workspace/restore` with the canvas's workspace YAML. */
  restoreOnMaster(): Promise<void>;
  closeRestore(): void;
}

export const createRestoreSlice: SliceCreator<RestoreSlice> = (set, get) => ({
  restore: { open: false, phase: "idle", outcomes: [], error: null },

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
      set({ restore: { open: true, phase: "error", outcomes: [], error: failureOf(error).message } });
    }
  },
  closeRestore() {
    set({ restore: { ...get().restore, open: false } });
  },
});
