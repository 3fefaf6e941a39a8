/**
 * The approvals slice: tool calls that wait for a person (docs/guides/approvals.md). A paused
 * query's approvals become cards in the chat; the pending approvals of every session
 * (`GET /approvals`) fill the approvals panel. Deciding posts `POST /approvals/{id}`; when the
 * decision completes its round, the run's result joins the transcript as any answer. A 409
 * (decided elsewhere) closes the card with the decision that stands; a 422 (an edit that does
 * not fit the tool's schema) keeps it open with the master's message.
 */
import type { Approval, QueryResponse } from "../api/types";
import { decisionBody, refusalOf, type Decision } from "../lib/approvals";
import { finishEntry, glowTargets, newAssistantEntry } from "../lib/chat";
import { messageOf, type SliceCreator } from "./runtime";

export interface ApprovalCardState {
  approval: Approval;
  phase: "pending" | "sending" | "decided";
  /** The master's refusal of the last decision (409, 422, 404…), shown on the card. */
  error: string | null;
}

export interface ApprovalsSlice {
  /** Every approval the page has seen, by id: the chat's cards and the panel's. */
  approvalCards: Record<string, ApprovalCardState>;
  /** `GET /approvals`: the pending approvals of every session, oldest first. */
  pendingApprovals: Approval[];
  approvalsPanelOpen: boolean;
  approvalsError: string | null;

  /** Show these approvals (a paused query's) as cards. */
  holdApprovals(approvals: readonly Approval[]): void;
  decideApproval(approvalId: string, decision: Decision): Promise<void>;
  loadPendingApprovals(): Promise<void>;
  setApprovalsPanelOpen(open: boolean): void;
}

export const createApprovalsSlice: SliceCreator<ApprovalsSlice> = (set, get) => {
  let resultSeq = 0;

  function putCard(approvalId: string, change: Partial<ApprovalCardState>) {
    const card = get().approvalCards[approvalId];
    if (!card) return;
    set({ approvalCards: { ...get().approvalCards, [approvalId]: { ...card, ...change } } });
  }

  function hold(approvals: readonly Approval[]) {
    const cards = { ...get().approvalCards };
    for (const approval of approvals) {
      const known = cards[approval.approval_id];
      const decided = (approval.status ?? "pending") !== "pending";
      cards[approval.approval_id] = {
        approval,
        phase: decided ? "decided" : known?.phase === "sending" ? "sending" : "pending",
        error: known?.error ?? null,
      };
    }
    set({ approvalCards: cards });
  }

  /** The run resumed and answered: show it in the chat as any answer (or a notice for another session's run). */
  function showResult(result: QueryResponse) {
    if (result.status === "awaiting_approval" && !result.plan) {
      hold(result.approvals ?? []);
      return;
    }
    const { sessionId } = get();
    const runSession = result.session_id ?? null;
    if (sessionId && runSession && runSession !== sessionId) {
      get().notify(result.success ? "info" : "error", `Session ${runSession.slice(0, 12)}: ${result.answer ?? result.error ?? ""}`);
      return;
    }
    const entry = finishEntry(newAssistantEntry(`r${++resultSeq}`), result);
    set({ transcript: [...get().transcript, entry], ...(sessionId || !runSession ? {} : { sessionId: runSession }) });
    if (result.approvals?.length) hold(result.approvals);
    for (const nodeId of glowTargets(result)) get().glowNode(nodeId, "fading");
  }

  return {
    approvalCards: {},
    pendingApprovals: [],
    approvalsPanelOpen: false,
    approvalsError: null,

    holdApprovals: hold,

    async decideApproval(approvalId, decision) {
      const { api } = get();
      const card = get().approvalCards[approvalId] ?? null;
      const approval = card?.approval ?? get().pendingApprovals.find((a) => a.approval_id === approvalId);
      if (!api || !approval || card?.phase === "sending" || card?.phase === "decided") return;
      if (!card) hold([approval]);
      putCard(approvalId, { phase: "sending", error: null });
      set({ busy: true });
      try {
        const result = await api.decideApproval(approvalId, decisionBody(approval, decision));
        const status = decision.decision === "approve" ? "approved" : "rejected";
        putCard(approvalId, { phase: "decided", approval: { ...approval, status } });
        showResult(result);
      } catch (error) {
        const refusal = refusalOf(error);
        if (refusal.kind === "invalid" || refusal.kind === "other") {
          putCard(approvalId, { phase: "pending", error: refusal.message });
        } else {
          putCard(approvalId, { phase: "decided", error: refusal.message, approval: refusal.stands ?? approval });
        }
        get().notify("error", refusal.message);
      } finally {
        set({ busy: false });
        void get().loadPendingApprovals();
      }
    },

    async loadPendingApprovals() {
      const { api } = get();
      if (!api) return;
      if (!get().canQuery()) {
        // GET /approvals needs the query permission: a read-only key is never offered approvals.
        set({ pendingApprovals: [], approvalsError: null });
        return;
      }
      try {
        set({ pendingApprovals: await api.approvals(), approvalsError: null });
      } catch (error) {
        set({ approvalsError: messageOf(error) });
      }
    },

    setApprovalsPanelOpen(open) {
      set({ approvalsPanelOpen: open });
      if (open) void get().loadPendingApprovals();
    },
  };
};
