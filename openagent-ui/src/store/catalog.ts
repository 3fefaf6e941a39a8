/**
 * The catalog slice: every agent the page knows, merged from the master's live table
 * (`GET /agents`), discovery (`GET /agents/discover`) and an imported workspace, with the
 * sidebar's search. An agent on the canvas going DOWN becomes an error notice.
 */
import { mergeCatalog, type AgentRow, type AgentStatus, type CatalogEntry, type DiscoveredRow } from "../lib/agents";
import type { DiscoveryProblem } from "../lib/builder";
import { linkedAgentIds } from "../lib/graph";
import type { SliceCreator } from "./runtime";

type CatalogSources = Pick<CatalogSlice, "liveRows" | "discovered" | "workspaceRows">;

export interface CatalogSlice {
  liveRows: AgentRow[];
  discovered: DiscoveredRow[];
  /** `GET /agents/discover`'s per-file errors. */
  discoveryErrors: DiscoveryProblem[];
  workspaceRows: CatalogEntry[];
  catalog: CatalogEntry[];
  catalogById: Record<string, CatalogEntry>;
  search: string;

  setSearch(search: string): void;
  /** Replace some of the sources and merge the catalog again (used by the other slices). */
  setCatalog(partial: Partial<CatalogSources>): void;
  /** Take a `GET /agents/discover` answer: its agents and its per-file errors. */
  setDiscovery(found: { agents: DiscoveredRow[]; errors: DiscoveryProblem[] }): void;
}

export const createCatalogSlice: SliceCreator<CatalogSlice> = (set, get) => ({
  liveRows: [],
  discovered: [],
  discoveryErrors: [],
  workspaceRows: [],
  catalog: [],
  catalogById: {},
  search: "",

  setSearch: (search) => set({ search }),

  setCatalog(partial) {
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
  },

  setDiscovery(found) {
    set({ discoveryErrors: found.errors });
    get().setCatalog({ discovered: found.agents });
  },
});
