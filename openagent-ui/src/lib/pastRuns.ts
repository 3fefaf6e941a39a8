/**
 * A past session in the chat: its stored turns (`GET /sessions/{session_id}`) as question and
 * answer entries, and the roles checklist of a run with roles from its record's `roles`
 * state (`GET /runs/{run_id}`), the same checklist the live events build.
 */
import type { components } from "../api/schema";
import type { RunRecord } from "../api/types";
import type { AssistantEntry, ChatEntry, ChecklistItem, SubtaskState } from "./chat";

type Subtask = components["schemas"]["Subtask"];

const STATE: Record<NonNullable<Subtask["status"]>, SubtaskState> = {
  pending: "pending",
  running: "running",
  reviewing: "running",
  passed: "passed",
  failed: "failed",
  blocked: "failed",
};

function stateOf(subtask: Subtask): SubtaskState {
  const state = STATE[subtask.status ?? "pending"];
  const last = subtask.verdicts?.[subtask.verdicts.length - 1];
  // Sent back and not started again: the live checklist shows it as retried too.
  return state === "pending" && last?.verdict === "needs_retry" ? "retried" : state;
}

/** The checklist of a run's record; `null` when the run had no roles (or no plan yet). */
export function checklistOfRun(record: RunRecord): ChecklistItem[] | null {
  const subtasks = record.roles?.subtasks ?? [];
  if (!subtasks.length) return null;
  return subtasks.map((subtask) => ({
    task: subtask.task,
    criteria: subtask.criteria ?? [],
    state: stateOf(subtask),
    attempt: subtask.attempts ?? 0,
    verdicts: (subtask.verdicts ?? []).map((v) => ({ role: v.role, verdict: v.verdict, reason: v.reason ?? "", attempt: v.attempt ?? 1 })),
  }));
}

/** A past query of the session: its question, answer and the run that answered. */
export interface PastQuery {
  question: string;
  answer: string;
  runId: string | null;
  /** The agents its stored tool turns called. */
  agentsUsed: string[];
}

/** The session's queries that were answered, oldest first (a query stores several turns: the last one with an answer holds it). */
export function pastQueries(turns: Record<string, unknown>[]): PastQuery[] {
  const byQuery = new Map<string, PastQuery>();
  const agents = new Map<string, Set<string>>();
  for (const turn of turns) {
    const queryId = typeof turn.query_id === "string" ? turn.query_id : null;
    if (queryId && typeof turn.tool_agent_id === "string") agents.set(queryId, (agents.get(queryId) ?? new Set()).add(turn.tool_agent_id));
    if (typeof turn.answer !== "string" || typeof turn.query !== "string") continue;
    const key = queryId ?? `#${byQuery.size}`;
    const agentsUsed = [...(agents.get(key) ?? [])];
    byQuery.set(key, { question: turn.query, answer: turn.answer, runId: typeof turn.run_id === "string" ? turn.run_id : null, agentsUsed });
  }
  return [...byQuery.values()];
}

/** The chat entries of past queries; `checklists` holds the checklist of each run with roles, by run id. */
export function pastEntries(queries: PastQuery[], checklists: Map<string, ChecklistItem[]>, idOf: () => string): ChatEntry[] {
  return queries.flatMap((q) => {
    const checklist = q.runId ? checklists.get(q.runId) : undefined;
    const answer: AssistantEntry = { kind: "assistant", id: idOf(), text: q.answer, steps: [], state: "done", round: 0, agentsUsed: q.agentsUsed, ...(checklist ? { checklist } : {}) };
    return [{ kind: "user" as const, id: idOf(), text: q.question, attachments: [] }, answer];
  });
}
