/**
 * The connection slice: the master's URL and key (kept in session storage), connecting with
 * the first calls a page needs, and polling `GET /agents` (with discovery every few polls)
 * while connected, noticing when the master stops answering and when it is back.
 */
import { ApiError, createApiClient, type ApiClient, type Health } from "../api/client";
import type { PromptProfile } from "../api/types";
import { attachmentLimitsOf } from "../lib/chat";
import { messageOf, type Runtime, type SliceCreator } from "./runtime";

const STORAGE_KEY = "openagent.ui.connection";

export type ConnectionState = "disconnected" | "connecting" | "connected" | "error";

export interface ConnectionSlice {
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

  connect(baseUrl: string, apiKey: string): Promise<boolean>;
  disconnect(): void;
  refresh(): Promise<void>;
}

function savedConnection(runtime: Runtime): { baseUrl?: string; apiKey?: string } {
  try {
    const raw = runtime.storage?.getItem(STORAGE_KEY);
    return raw ? (JSON.parse(raw) as { baseUrl?: string; apiKey?: string }) : {};
  } catch {
    return {};
  }
}

export function createConnectionSlice(runtime: Runtime): SliceCreator<ConnectionSlice> {
  const { storage, pollMs, discoverEvery, setTimer, clearTimer, now } = runtime;
  return (set, get) => {
    let poll: unknown = null;
    let polls = 0;
    const saved = savedConnection(runtime);

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

    return {
      baseUrl: saved.baseUrl ?? runtime.defaultBaseUrl ?? "",
      apiKey: saved.apiKey ?? "",
      connection: "disconnected",
      connectionError: null,
      lost: false,
      health: null,
      lastRefresh: null,
      api: null,
      sandboxEnabled: false,
      discoveryAvailable: false,

      async connect(baseUrl, apiKey) {
        stopPolling();
        const fetchOption = runtime.fetch ? { fetch: runtime.fetch } : {};
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
          const [models, discovered, sandbox, identity] = await Promise.all([
            api.models().catch(() => null),
            api.discover().catch(() => null),
            api.sandboxStatus().catch(() => null),
            api.whoami().catch(() => null),
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
            identity,
            discoveryAvailable: discovered !== null,
            discoveryErrors: discovered?.errors ?? [],
          });
          get().setCatalog({ liveRows: rows, discovered: discovered?.agents ?? [] });
          polls = 0;
          schedulePoll();
          void get().loadPendingApprovals(); // the toolbar's count of waiting approvals
          void get().restoreSession(); // after a reload: the session's past answers
          return true;
        } catch (error) {
          set({ connection: "error", connectionError: messageOf(error) });
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
          identity: null,
          lost: false,
          liveRows: [],
          health: null,
          discoveryErrors: [],
          builder: { ...get().builder, models: null, unavailable: null },
        });
        get().setCatalog({ liveRows: [], discovered: [] });
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
          if (polls % discoverEvery === 0) void get().loadPendingApprovals();
          get().setCatalog(discovered !== null ? { liveRows: rows, discovered: discovered.agents } : { liveRows: rows });
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
    };
  };
}
