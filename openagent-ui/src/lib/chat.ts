/**
 * The chat panel's model: building `POST /query` bodies, folding the stream's typed events
 * (`RunEvent`, generated from the master's OpenAPI document: step, tool_call, tool_progress,
 * tool_result, token, with roles plan, subtask_started and verdict, query_result) into a
 * transcript entry, which nodes glow, and "copy as curl". Pure functions.
 */
import type {
  Attachment,
  ErrorCode,
  Plan,
  PlanEvent,
  PlanStep,
  PromptProfile,
  QueryRequest,
  QueryResponse,
  RunEvent,
  SubtaskStartedEvent,
  ToolCallEvent,
  ToolProgressEvent,
  ToolResultEvent,
  VerdictEvent,
} from "../api/types";
import { ORCHESTRATOR_ID, agentNodeId } from "./graph";

export interface ToolStep {
  callId: string | null;
  agentId: string | null;
  toolName: string;
  arguments: unknown;
  state: "running" | "ok" | "error";
  progress?: { message: string; progress: number | null };
  result?: unknown;
  error?: string;
}

/** A sub-task's state in the roles checklist: `retried` once the reviewer sent it back. */
export type SubtaskState = "pending" | "running" | "passed" | "failed" | "retried";

export interface ChecklistVerdict {
  role: VerdictEvent["role"];
  verdict: VerdictEvent["verdict"];
  reason: string;
  attempt: number;
}

/** One sub-task of an auto-mode run with roles, as the checklist shows it. */
export interface ChecklistItem {
  task: string;
  criteria: string[];
  state: SubtaskState;
  attempt: number;
  verdicts: ChecklistVerdict[];
}

export interface UserEntry {
  kind: "user";
  id: string;
  text: string;
  attachments: string[];
}

export interface AssistantEntry {
  kind: "assistant";
  id: string;
  text: string;
  steps: ToolStep[];
  state: "streaming" | "done" | "error";
  round: number;
  error?: string;
  errorCode?: string | null;
  httpStatus?: number;
  agentsUsed?: string[];
  plan?: Plan;
  planState?: "pending" | "running" | "executed" | "discarded";
  stoppedBy?: string | null;
  /** The tool calls this answer waits on (`status: "awaiting_approval"` with `approvals`). */
  approvalIds?: string[];
  /** The plan of an auto-mode run with roles, live from `plan`, `subtask_started` and `verdict`. */
  checklist?: ChecklistItem[];
}

export type ChatEntry = UserEntry | AssistantEntry;

export interface QueryOptions {
  text: string;
  sessionId: string | null;
  allowedAgentIds: string[];
  model: string | null;
  profile: PromptProfile;
  autoMode: boolean;
  requirePlanApproval: boolean;
  attachments?: Attachment[];
  execute?: { planId: string; steps: PlanStep[] };
}

/** The body of a streamed `POST /query`. */
export function buildQuery(options: QueryOptions): QueryRequest {
  const body: QueryRequest = {
    query: options.text,
    allowed_agent_ids: options.allowedAgentIds,
    orchestrator_prompt_profile: options.profile,
    auto_mode: options.autoMode || options.execute !== undefined,
    stream: true,
  };
  if (options.sessionId) body.session_id = options.sessionId;
  if (options.model) body.orchestrator_model = options.model;
  if (options.autoMode && options.requirePlanApproval && !options.execute) body.auto_require_plan_approval = true;
  if (options.execute) body.auto_plan_execute = { plan_id: options.execute.planId, steps: options.execute.steps };
  if (options.attachments && options.attachments.length > 0) body.attachments = options.attachments;
  return body;
}

export function newAssistantEntry(id: string): AssistantEntry {
  return { kind: "assistant", id, text: "", steps: [], state: "streaming", round: 0 };
}

type ToolEvent = ToolCallEvent | ToolProgressEvent | ToolResultEvent;

function updateStep(steps: ToolStep[], event: ToolEvent, change: (step: ToolStep) => ToolStep, create: boolean): ToolStep[] {
  const callId = event.call_id ?? null;
  const agentId = event.agent_id ?? null;
  const toolName = event.tool_name ?? "?";
  // Match by call id; else the last running step of the same agent and tool.
  let index = callId !== null ? steps.findIndex((s) => s.callId === callId) : -1;
  if (index === -1) {
    for (let i = steps.length - 1; i >= 0; i--) {
      const s = steps[i]!;
      if (s.state === "running" && s.agentId === agentId && s.toolName === toolName) {
        index = i;
        break;
      }
    }
  }
  if (index === -1) {
    if (!create) return steps;
    const args = event.type === "tool_call" ? (event.arguments ?? {}) : {};
    const fresh: ToolStep = { callId, agentId, toolName, arguments: args, state: "running" };
    return [...steps, change(fresh)];
  }
  return steps.map((s, i) => (i === index ? change(s) : s));
}

/** The checklist of a new plan: every sub-task pending. */
export function checklistOf(event: PlanEvent): ChecklistItem[] {
  return event.subtasks.map((s) => ({ task: s.task, criteria: s.criteria ?? [], state: "pending", attempt: 0, verdicts: [] }));
}

const VERDICT_STATE: Record<VerdictEvent["verdict"], SubtaskState> = { pass: "passed", fail: "failed", needs_retry: "retried" };

function updateItem(list: ChecklistItem[] | undefined, index: number, change: (item: ChecklistItem) => ChecklistItem): ChecklistItem[] | undefined {
  if (!list || index < 0 || index >= list.length) return list;
  return list.map((item, i) => (i === index ? change(item) : item));
}

function startSubtask(list: ChecklistItem[] | undefined, event: SubtaskStartedEvent): ChecklistItem[] | undefined {
  return updateItem(list, event.index, (item) => ({ ...item, state: "running", attempt: event.attempt ?? item.attempt + 1 }));
}

function judgeSubtask(list: ChecklistItem[] | undefined, event: VerdictEvent): ChecklistItem[] | undefined {
  const verdict: ChecklistVerdict = { role: event.role, verdict: event.verdict, reason: event.reason ?? "", attempt: event.attempt ?? 1 };
  return updateItem(list, event.index, (item) => ({ ...item, state: VERDICT_STATE[event.verdict], verdicts: [...item.verdicts, verdict] }));
}

/** Fold one stream event into the entry. */
export function applyEvent(entry: AssistantEntry, event: RunEvent): AssistantEntry {
  switch (event.type) {
    case "step":
      return { ...entry, round: event.step };
    case "tool_call":
      return { ...entry, steps: updateStep(entry.steps, event, (s) => ({ ...s, arguments: event.arguments ?? s.arguments }), true) };
    case "tool_progress":
      return {
        ...entry,
        steps: updateStep(entry.steps, event, (s) => ({ ...s, progress: { message: event.message ?? "", progress: event.progress ?? null } }), true),
      };
    case "tool_result":
      return {
        ...entry,
        steps: updateStep(
          entry.steps,
          event,
          (s) => (event.success ? { ...s, state: "ok", result: event.result } : { ...s, state: "error", error: event.error ?? "the tool call failed" }),
          true,
        ),
      };
    case "token":
      return { ...entry, text: entry.text + event.text };
    case "plan":
      return { ...entry, checklist: checklistOf(event) };
    case "subtask_started":
      return { ...entry, checklist: startSubtask(entry.checklist, event) };
    case "verdict":
      return { ...entry, checklist: judgeSubtask(entry.checklist, event) };
    case "query_result":
      return finishEntry(entry, event);
    default:
      return entry;
  }
}

export function finishEntry(entry: AssistantEntry, result: QueryResponse, httpStatus?: number): AssistantEntry {
  const done: AssistantEntry = {
    ...entry,
    state: result.success ? "done" : "error",
    text: result.answer ?? entry.text,
    agentsUsed: [...new Set((result.agents_used ?? []).map((a) => a.agent_id))],
    stoppedBy: result.stopped_by ?? null,
    // A step still running when the answer arrives did not report back.
    steps: entry.steps.map((s) => (s.state === "running" ? { ...s, state: "error", error: s.error ?? "no result reported" } : s)),
  };
  if (!result.success) {
    done.error = result.error ?? "the query failed";
    done.errorCode = result.error_code ?? null;
  }
  if (httpStatus !== undefined) done.httpStatus = httpStatus;
  if (result.status === "awaiting_approval" && result.plan) {
    done.plan = result.plan;
    done.planState = "pending";
  }
  if (result.status === "awaiting_approval" && result.approvals?.length) {
    done.approvalIds = result.approvals.map((a) => a.approval_id);
  }
  return done;
}

/**
 * The nodes that glow when an answer arrives: the agents it used; the orchestrator when it
 * answered from its own context. Nothing for a failure or a plan awaiting approval.
 */
export function glowTargets(result: Pick<QueryResponse, "success" | "agents_used" | "status">): string[] {
  if (!result.success || result.status === "awaiting_approval") return [];
  const agents = [...new Set((result.agents_used ?? []).map((a) => a.agent_id))];
  return agents.length > 0 ? agents.map(agentNodeId) : [ORCHESTRATOR_ID];
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** "Copy as curl" of a query; the key is left as an environment variable, never copied. */
export function curlCommand(baseUrl: string, body: QueryRequest, withKey: boolean): string {
  const { stream: _stream, ...rest } = body;
  const lines = [`curl -sN ${shellQuote(`${baseUrl.replace(/\/$/, "")}/query`)}`];
  if (withKey) lines.push(`-H "Authorization: Bearer $OPENAGENT_API_KEY"`);
  lines.push(`-H 'Content-Type: application/json'`);
  const json = JSON.stringify(_stream ? { ...rest, stream: true } : rest);
  lines.push(`-d ${shellQuote(json)}`);
  return lines.join(" \\\n  ");
}

/** Parse a plan step's arguments from the editor's text; the error names the step. */
export function parseArguments(text: string, stepNumber: number): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text || "{}");
  } catch (error) {
    throw new Error(`step ${stepNumber}: arguments are not valid JSON (${(error as Error).message})`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`step ${stepNumber}: arguments must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

/** The master's refusal codes for attachments, and the HTTP status a non-streamed query gets. */
export const ATTACHMENT_ERROR_STATUS: Readonly<Partial<Record<ErrorCode, number>>> = {
  attachment_too_large: 413,
  too_many_attachments: 413,
  invalid_attachment: 400,
};

/**
 * The message to show under the composer when the master refused a query's attachments:
 * `413 · attachment 'big.txt' is 300001 bytes; the limit is …`. A streamed query carries the
 * refusal as a failed `query_result` (its `error_code`); a plain one as a 413/400 body.
 * `null` when the failure is not about attachments.
 */
export function attachmentFailure(code: string | null | undefined, httpStatus: number | undefined, message: string): string | null {
  const status = (code ? ATTACHMENT_ERROR_STATUS[code as ErrorCode] : undefined) ?? (httpStatus === 413 ? 413 : undefined);
  if (status === undefined) return null;
  return message.startsWith(String(status)) ? message : `${status} · ${message}`;
}

export interface AttachmentLimits {
  maxBytes: number;
  maxCount: number;
}

/** `attachment_limits` of `GET /query/orchestrator-models`, when the master sends them. */
export function attachmentLimitsOf(models: Record<string, unknown> | null | undefined): AttachmentLimits | null {
  const raw = models?.attachment_limits;
  if (!raw || typeof raw !== "object") return null;
  const { max_bytes: maxBytes, max_count: maxCount } = raw as Record<string, unknown>;
  if (typeof maxBytes !== "number" || typeof maxCount !== "number" || maxBytes <= 0 || maxCount < 0) return null;
  return { maxBytes, maxCount };
}

export const formatBytes = (bytes: number): string =>
  bytes < 1024 ? `${bytes} B` : bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(bytes % 1024 ? 1 : 0)} KB` : `${(bytes / 1024 / 1024).toFixed(bytes % (1024 * 1024) ? 1 : 0)} MB`;

/** Why these files cannot be sent (the same limits the master checks), or `null`. */
export function attachmentProblem(files: readonly { name: string; size: number }[], limits: AttachmentLimits): string | null {
  if (files.length > limits.maxCount) {
    return `${files.length} files attached: the master accepts at most ${limits.maxCount} per query`;
  }
  const big = files.find((f) => f.size > limits.maxBytes);
  if (big) return `${big.name} is ${formatBytes(big.size)}: the limit is ${formatBytes(limits.maxBytes)} per file`;
  return null;
}

export interface SessionFile {
  ref: string;
  filename: string;
  size: number;
  /** The indexer's state for the file: "indexed", "failed"…; "not indexed yet" when it has none. */
  status: string;
  chunks: number | null;
  error: string | null;
}

/** The files of `GET /query/session-rag-context`, oldest first. */
export function sessionFiles(context: unknown): SessionFile[] {
  const rows = (context as { attachments?: unknown } | null)?.attachments;
  if (!Array.isArray(rows)) return [];
  return rows.flatMap((row: Record<string, unknown>) => {
    if (!row || typeof row.ref !== "string") return [];
    const index = (row.index && typeof row.index === "object" ? row.index : null) as Record<string, unknown> | null;
    return [
      {
        ref: row.ref,
        filename: String(row.filename ?? row.ref),
        size: typeof row.size === "number" ? row.size : 0,
        status: typeof index?.status === "string" ? index.status : "not indexed yet",
        chunks: typeof index?.chunks === "number" ? index.chunks : null,
        error: typeof index?.error === "string" ? index.error : null,
      },
    ];
  });
}
