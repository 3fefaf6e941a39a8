/**
 * The page's one store (Zustand), built by {@link createAppStore} from one slice per concern
 * (Zustand's slices pattern) and provided through React context (store/context.tsx). I/O goes
 * through an injected fetch, so tests run it against a fake master; timers and the clock are
 * injected too.
 *
 * - connection.ts: the master's URL and key, connecting, polling `GET /agents`
 * - catalog.ts: the agents known from the master, discovery and an imported workspace
 * - canvas.ts: nodes, edges, undo/redo, linking agents, workspace YAML
 * - activity.ts: node glow and per-agent call logs while a query runs
 * - chat.ts: the transcript and the query options
 * - approvals.ts: tool calls waiting for a person, their cards and the approvals panel
 * - builder.ts: the agent builder panel
 * - restore.ts: "Restore on master"
 * - sandbox.ts: sandbox deployments and their log dialog
 * - keys.ts: who the key is (`GET /whoami`) and the administrators' key panel
 * - notices.ts: the page's notices
 */
import { createStore, type StoreApi } from "zustand";
import { createActivitySlice, type ActivitySlice } from "./activity";
import { createApprovalsSlice, type ApprovalsSlice } from "./approvals";
import { createBuilderSlice, type BuilderSlice } from "./builder";
import { createCanvasSlice, type CanvasSlice } from "./canvas";
import { createCatalogSlice, type CatalogSlice } from "./catalog";
import { createChatSlice, type ChatSlice } from "./chat";
import { createConnectionSlice, type ConnectionSlice } from "./connection";
import { createKeysSlice, type KeysSlice } from "./keys";
import { createNoticesSlice, type NoticesSlice } from "./notices";
import { createRestoreSlice, type RestoreSlice } from "./restore";
import { runtimeOf, type StoreOptions } from "./runtime";
import { createSandboxSlice, type SandboxSlice } from "./sandbox";

export { CALL_LOG_LIMIT, GLOW_FADE_MS, type CallLogEntry, type Glow } from "./activity";
export type { ApprovalCardState } from "./approvals";
export type { BuilderState } from "./builder";
export type { LinkNote } from "./canvas";
export type { ConnectionState } from "./connection";
export type { KeysState } from "./keys";
export { NOTICE_TIMEOUT_MS, type Notice } from "./notices";
export type { RestoreState } from "./restore";
export type { StoreOptions } from "./runtime";
export { LOG_TAIL_LINES, type SandboxLogsState } from "./sandbox";

export type AppState = ConnectionSlice &
  CatalogSlice &
  CanvasSlice &
  ActivitySlice &
  ChatSlice &
  ApprovalsSlice &
  BuilderSlice &
  RestoreSlice &
  SandboxSlice &
  KeysSlice &
  NoticesSlice;

export type AppStore = StoreApi<AppState>;

export function createAppStore(options: StoreOptions = {}): AppStore {
  const runtime = runtimeOf(options);
  return createStore<AppState>()((...a) => ({
    ...createConnectionSlice(runtime)(...a),
    ...createCatalogSlice(...a),
    ...createCanvasSlice(...a),
    ...createActivitySlice(runtime)(...a),
    ...createChatSlice(runtime)(...a),
    ...createApprovalsSlice(...a),
    ...createBuilderSlice(...a),
    ...createRestoreSlice(...a),
    ...createSandboxSlice(...a),
    ...createKeysSlice(...a),
    ...createNoticesSlice(runtime)(...a),
  }));
}
