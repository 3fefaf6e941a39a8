/**
 * The keys slice: who the page's key is (`GET /whoami`, read at connect by the connection
 * slice) and, for administrators, the key panel: list, create (the secret shown once) and revoke.
 */
import type { CreatedKey, KeyInfo, KeyRequest, WhoAmI } from "../api/client";
import { failureOf, type SliceCreator } from "./runtime";

export interface KeysState {
  open: boolean;
  rows: KeyInfo[];
  /** The key just created, with its secret: shown once, dropped when the panel closes. */
  created: CreatedKey | null;
  busy: boolean;
  error: string | null;
}

export interface KeysSlice {
  /** The connected key (`null` before connecting, or from a master without `/whoami`). */
  identity: WhoAmI | null;
  keys: KeysState;

  /** Whether the key may use administrator features (builder, restore, deploy, keys). */
  isAdmin(): boolean;
  /**
   * Whether the key may ask questions and decide approvals (the master's `query` permission:
   * roles `admin` and `client`). A `viewer` (read-only) or `agent` key is offered neither.
   */
  canQuery(): boolean;
  /** Whether the key may register agents (`POST /register`, the `agent` permission: roles `admin` and `agent`). */
  canRegister(): boolean;
  openKeys(): Promise<void>;
  closeKeys(): void;
  createKey(body: KeyRequest): Promise<boolean>;
  revokeKey(keyId: string): Promise<void>;
}

/** The roles holding the master's `query` permission (master/access/permissions.py, ROLES_WITH). */
const QUERY_ROLES: ReadonlySet<string> = new Set(["admin", "client"]);
/** The roles holding the master's `agent` permission (registering agents). */
const AGENT_ROLES: ReadonlySet<string> = new Set(["admin", "agent"]);

const CLOSED: KeysState = { open: false, rows: [], created: null, busy: false, error: null };

export const createKeysSlice: SliceCreator<KeysSlice> = (set, get) => {
  async function load(): Promise<void> {
    const api = get().api;
    if (!api) return;
    try {
      set({ keys: { ...get().keys, rows: await api.keys(), error: null } });
    } catch (error) {
      set({ keys: { ...get().keys, error: failureOf(error).message } });
    }
  }

  return {
    identity: null,
    keys: CLOSED,

    isAdmin() {
      const identity = get().identity;
      return identity === null || identity.role === "admin"; // an older master: no roles
    },
    canQuery() {
      const identity = get().identity;
      return identity === null || QUERY_ROLES.has(identity.role);
    },
    canRegister() {
      const identity = get().identity;
      return identity === null || AGENT_ROLES.has(identity.role);
    },
    async openKeys() {
      set({ keys: { ...CLOSED, open: true, busy: true } });
      await load();
      set({ keys: { ...get().keys, busy: false } });
    },
    closeKeys() {
      set({ keys: CLOSED });
    },
    async createKey(body) {
      const api = get().api;
      if (!api) return false;
      set({ keys: { ...get().keys, busy: true, error: null, created: null } });
      try {
        const created = await api.createKey(body);
        set({ keys: { ...get().keys, created } });
        await load();
        return true;
      } catch (error) {
        set({ keys: { ...get().keys, error: failureOf(error).message } });
        return false;
      } finally {
        set({ keys: { ...get().keys, busy: false } });
      }
    },
    async revokeKey(keyId) {
      const api = get().api;
      if (!api) return;
      set({ keys: { ...get().keys, busy: true, error: null } });
      try {
        await api.revokeKey(keyId);
        get().notify("info", `Revoked key ${keyId}`);
        await load();
      } catch (error) {
        set({ keys: { ...get().keys, error: failureOf(error).message } });
      } finally {
        set({ keys: { ...get().keys, busy: false } });
      }
    },
  };
};
