/**
 * The agent builder and "Restore on master" as the page sees them: the shapes of
 * `POST /generate-agent` (and its 422), `POST /save-agent`, `GET /agents/discover`'s per-file
 * errors and `POST /internal/workspace/restore`'s per-agent outcomes (the API types are
 * generated from the master's OpenAPI document). Pure functions only.
 */
import type { AgentOutcome, Check, DiscoveryProblem, GeneratorModels, SavedAgent } from "../api/types";
import type { ToolInfo } from "./agents";

export type { Check, DiscoveryProblem, GeneratorModels };

export type Transport = "websocket" | "invocation";

/** What the user describes. */
export interface BuilderForm {
  name: string;
  description: string;
  transport: Transport;
  requiresCollaboration: boolean;
  /** `null`: the generator's default model. */
  model: string | null;
  /** Tool names the agent must offer, comma or space separated. */
  tools: string;
}

export const EMPTY_FORM: BuilderForm = {
  name: "",
  description: "",
  transport: "websocket",
  requiresCollaboration: false,
  model: null,
  tools: "",
};

/** `GET /generate-agent/models`. */

/** Code the generator wrote: from a 200 (every check passed) or a 422 (some failed). */
export interface Generated {
  module: string;
  agentId: string | null;
  source: string;
  transport: string | null;
  tools: ToolInfo[];
  checks: Check[];
  model: string | null;
  attempts: number | null;
  passed: boolean;
}

/** The master's `code` and message of a 422 that carried no code to show. */
export interface GenerationProblem {
  code: string;
  message: string;
}

/** What the page keeps of a `POST /save-agent` answer. */
export type Saved = Pick<SavedAgent, "module" | "file" | "handler">;

export type RestoreStatus = "registered" | "unreachable" | "invalid" | "skipped";

/** A row of `POST /internal/workspace/restore`. */
export type RestoreOutcome = AgentOutcome;

/** A Python module name the master accepts (openagent/agent_modules.py: `is_module_name`). */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,99}$/;
const KEYWORDS = new Set(
  (
    "False None True and as assert async await break class continue def del elif else except finally for from " +
    "global if import in is lambda nonlocal not or pass raise return try while with yield"
  ).split(" "),
);

/** Why `name` cannot be a module name, or `null` when it can. */
export function moduleNameProblem(name: string): string | null {
  if (!name) return "a module name is needed";
  if (!IDENTIFIER.test(name)) return "letters, digits and _ only, not starting with a digit (at most 100)";
  if (KEYWORDS.has(name)) return `${name} is a Python keyword`;
  if (name.startsWith("__")) return "a module name cannot start with __";
  return null;
}

/** Tool names typed by the user: comma or space separated, duplicates dropped. */
export function toolNames(text: string): string[] {
  return [...new Set(text.split(/[\s,]+/).filter(Boolean))];
}

/** Why the form cannot be sent, or `null`. */
export function formProblem(form: BuilderForm): string | null {
  if (!form.name.trim()) return "Give the agent a name";
  if (!form.description.trim()) return "Describe what the agent should do";
  if (form.requiresCollaboration && form.transport !== "websocket") {
    return "Collaboration needs the WebSocket transport (peer messages go over WebSocket)";
  }
  const bad = toolNames(form.tools).find((t) => !/^[A-Za-z0-9_-]{1,64}$/.test(t));
  if (bad) return `Tool name ${JSON.stringify(bad)}: letters, digits, _ and - only (at most 64)`;
  return null;
}

/** The body of `POST /generate-agent`. */
export function generateBody(form: BuilderForm): Record<string, unknown> {
  const body: Record<string, unknown> = {
    name: form.name.trim(),
    description: form.description.trim(),
    agent_type: "action",
    transport: form.transport,
    requires_collaboration: form.requiresCollaboration,
  };
  if (form.model) body.model = form.model;
  const tools = toolNames(form.tools);
  if (tools.length) body.tools = tools;
  return body;
}

function checksOf(raw: unknown): Check[] {
  if (!Array.isArray(raw)) return [];
  return raw
    .filter((c): c is Record<string, unknown> => c !== null && typeof c === "object")
    .map((c) => ({ name: String(c.name ?? "?"), passed: c.passed === true, detail: String(c.detail ?? "") }));
}

const str = (value: unknown): string | null => (typeof value === "string" ? value : null);

/** A 200 answer of `POST /generate-agent`. */
export function generatedFrom(body: Record<string, unknown>): Generated {
  const checks = checksOf(body.checks);
  return {
    module: str(body.module) ?? "",
    agentId: str(body.agent_id),
    source: str(body.source) ?? "",
    transport: str(body.transport),
    tools: Array.isArray(body.tools) ? (body.tools as ToolInfo[]) : [],
    checks,
    model: str(body.model),
    attempts: typeof body.attempts === "number" ? body.attempts : null,
    passed: checks.every((c) => c.passed),
  };
}

/**
 * A 422 of `POST /generate-agent`: `{detail: {code, message, module, source, checks}}` when
 * the code failed its checks (the code is shown, it can still be saved), or a problem without
 * code (prose twice, an unsupported agent type, or FastAPI's own validation errors).
 */
export function generationFailure(body: unknown): { generated: Generated | null; problem: GenerationProblem } | null {
  if (!body || typeof body !== "object") return null;
  const detail = (body as Record<string, unknown>).detail;
  if (!detail || typeof detail !== "object" || Array.isArray(detail)) return null;
  const d = detail as Record<string, unknown>;
  const problem = { code: str(d.code) ?? "invalid", message: str(d.message) ?? "the generated code failed its checks" };
  const source = str(d.source) ?? "";
  const checks = checksOf(d.checks);
  if (!source && checks.length === 0) return { generated: null, problem };
  return {
    generated: {
      module: str(d.module) ?? "",
      agentId: null,
      source,
      transport: null,
      tools: [],
      checks,
      model: null,
      attempts: null,
      passed: false,
    },
    problem,
  };
}

/** `GET /agents/discover`'s `errors`, keeping only well-formed rows. */
export function discoveryProblems(raw: unknown): DiscoveryProblem[] {
  if (!Array.isArray(raw)) return [];
  return raw
    .filter((p): p is Record<string, unknown> => p !== null && typeof p === "object" && typeof p.file === "string")
    .map((p) => {
      const problem: DiscoveryProblem = { file: p.file as string, error: String(p.error ?? "cannot be analysed") };
      if (typeof p.module === "string") problem.module = p.module;
      if (typeof p.agent_id === "string") problem.agent_id = p.agent_id;
      return problem;
    });
}

/** "2 registered · 1 unreachable · 1 invalid", in a fixed order. */
export function restoreSummary(outcomes: readonly RestoreOutcome[]): string {
  if (outcomes.length === 0) return "The workspace has no agents to restore";
  const order = ["registered", "unreachable", "invalid", "skipped"];
  const counts = new Map<string, number>();
  for (const o of outcomes) counts.set(o.status, (counts.get(o.status) ?? 0) + 1);
  const statuses = [...counts.keys()].sort((a, b) => {
    const ia = order.indexOf(a);
    const ib = order.indexOf(b);
    return (ia === -1 ? order.length : ia) - (ib === -1 ? order.length : ib) || a.localeCompare(b);
  });
  return statuses.map((s) => `${counts.get(s)} ${s}`).join(" · ");
}
