/**
 * The chat slice: the transcript of the session, the query options (model, profile, auto
 * mode, plan approval), attachments and the session's files, plans to approve, and the curl
 * command of the last query. A query is scoped to the agents linked on the canvas.
 */
import { ApiError } from "../api/client";
import type { Attachment, PlanStep, PromptProfile, QueryRequest, QueryResponse } from "../api/types";
import {
  applyEvent,
  attachmentFailure,
  buildQuery,
  curlCommand,
  finishEntry,
  glowTargets,
  newAssistantEntry,
  sessionFiles,
  type AssistantEntry,
  type ChatEntry,
  type SessionFile,
} from "../lib/chat";
import { agentNodeId, linkedAgentIds } from "../lib/graph";
import { checklistOfRun, pastEntries, pastQueries } from "../lib/pastRuns";
import type { ChecklistItem } from "../lib/chat";
import { baseOf, messageOf, type Runtime, type SliceCreator } from "./runtime";

/** The chat's session id, kept in session storage so a reload shows the session again. */
const SESSION_KEY = "openagent.ui.session";

export interface ChatSlice {
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
  /** After a reload: the kept session's answers (`GET /sessions/{id}`), with the checklist of each run with roles (`GET /runs/{id}`). */
  restoreSession(): Promise<void>;
  curl(): string | null;
}

export function createChatSlice(runtime: Pick<Runtime, "storage">): SliceCreator<ChatSlice> {
  return (set, get) => {
    let entryId = 0;

    function keepSession(sessionId: string | null) {
      try {
        if (sessionId) runtime.storage?.setItem(SESSION_KEY, sessionId);
        else runtime.storage?.removeItem(SESSION_KEY);
      } catch {
        /* storage full or blocked: a reload simply starts a new chat */
      }
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
          onEvent(event) {
            updateEntry(entry.id, (e) => applyEvent(e, event));
            if ((event.type === "tool_call" || event.type === "tool_result") && event.agent_id) {
              get().logCall(event.agent_id, event);
              get().glowNode(agentNodeId(event.agent_id), event.type === "tool_call" ? "active" : "fading");
            }
          },
        });
        updateEntry(entry.id, (e) => (e.state === "streaming" ? finishEntry(e, result) : e));
        if (result.session_id) {
          set({ sessionId: result.session_id });
          keepSession(result.session_id);
        }
        if (result.status === "awaiting_approval" && result.approvals?.length) get().holdApprovals(result.approvals);
        for (const nodeId of glowTargets(result)) get().glowNode(nodeId, "fading");
        if (!result.success) {
          const refused = attachmentFailure(result.error_code, undefined, result.error ?? "the attachments were refused");
          if (refused) set({ attachmentError: refused });
          get().notify("error", refused ?? result.error ?? "the query failed");
          return refused === null;
        }
        return true;
      } catch (error) {
        const message = messageOf(error);
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
        for (const [nodeId, g] of Object.entries(get().glow)) if (g.phase === "active") get().glowNode(nodeId, "fading");
        get().notify("error", message, error instanceof ApiError && error.lostConnection);
        return refused === null;
      } finally {
        set({ busy: false });
      }
    }

    return {
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
        keepSession(null);
        if (api && sessionId) {
          try {
            await api.deleteSession(sessionId);
          } catch (error) {
            get().notify("warning", `The server-side session was not deleted: ${(error as Error).message}`);
          }
        }
      },

      async restoreSession() {
        let kept: string | null = null;
        try {
          kept = runtime.storage?.getItem(SESSION_KEY) ?? null;
        } catch {
          /* storage blocked */
        }
        const { api } = get();
        if (!api || !kept || get().sessionId || get().transcript.length) return;
        let queries;
        try {
          queries = pastQueries((await api.session(kept)).turns);
        } catch (error) {
          if (error instanceof ApiError && error.status === 404) keepSession(null); // expired or deleted
          return;
        }
        const checklists = new Map<string, ChecklistItem[]>();
        await Promise.all(
          queries.map(async ({ runId }) => {
            if (!runId) return;
            const checklist = await api.run(runId).then(checklistOfRun, () => null); // a run's record expires before its session
            if (checklist) checklists.set(runId, checklist);
          }),
        );
        if (get().sessionId || get().transcript.length) return; // the user asked meanwhile
        set({ sessionId: kept, transcript: pastEntries(queries, checklists, () => `p${++entryId}`) });
      },

      curl() {
        const { lastQuery, api, baseUrl } = get();
        if (!lastQuery) return null;
        return curlCommand(baseOf(baseUrl, ""), lastQuery, api?.hasKey ?? get().apiKey !== "");
      },
    };
  };
}
