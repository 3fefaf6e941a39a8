/**
 * Approval cards' model (docs/guides/approvals.md): a held tool call's arguments as a form built
 * from the tool's JSON schema, the form's values read back into arguments (each problem named by
 * its field), the body of `POST /approvals/{id}`, the time left, and what a refusal (404, 409,
 * 422) means to the person deciding. Pure functions.
 */
import { ApiError } from "../api/client";
import type { Approval, ToolSchema } from "../api/types";

export type FieldKind = "string" | "number" | "integer" | "boolean" | "enum" | "json";

export interface ArgField {
  name: string;
  kind: FieldKind;
  required: boolean;
  description: string;
  /** The choices of an `enum` field. */
  options: string[];
}

/** A field's value as the form holds it: text for inputs, a boolean for a checkbox. */
export type FieldValue = string | boolean;
export type ArgDraft = Record<string, FieldValue>;

const obj = (v: unknown): Record<string, unknown> | null =>
  v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;

function kindOf(schema: Record<string, unknown>): { kind: FieldKind; options: string[] } {
  const choices = Array.isArray(schema.enum) ? schema.enum : null;
  if (choices && choices.every((c) => typeof c === "string")) return { kind: "enum", options: choices as string[] };
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  if (type === "string" || type === "number" || type === "integer" || type === "boolean") return { kind: type, options: [] };
  return { kind: "json", options: [] };
}

/**
 * One field per property of the tool's `parameters` (in schema order), then one per argument
 * the model sent that the schema does not name (as JSON), so nothing the call carries is hidden.
 */
export function fieldsOf(parameters: unknown, args: Record<string, unknown>): ArgField[] {
  const schema = obj(parameters) ?? {};
  const properties = obj(schema.properties) ?? {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r) => typeof r === "string") : []);
  const fields: ArgField[] = Object.entries(properties).map(([name, raw]) => {
    const property = obj(raw) ?? {};
    return {
      name,
      ...kindOf(property),
      required: required.has(name),
      description: typeof property.description === "string" ? property.description : "",
    };
  });
  for (const name of Object.keys(args)) {
    if (!(name in properties)) fields.push({ name, kind: "json", required: false, description: "", options: [] });
  }
  return fields;
}

/** The form's first values: the arguments the model wrote. */
export function draftOf(fields: readonly ArgField[], args: Record<string, unknown>): ArgDraft {
  const draft: ArgDraft = {};
  for (const field of fields) {
    const value = args[field.name];
    if (field.kind === "boolean") draft[field.name] = value === true;
    else if (value === undefined) draft[field.name] = "";
    else if (field.kind === "json" || typeof value !== "string") draft[field.name] = JSON.stringify(value);
    else draft[field.name] = value;
  }
  return draft;
}

/**
 * The arguments the form holds, or the problems, each naming its field (`amount: not a number`).
 * An empty optional field is left out; a boolean the model did not send stays out unless ticked.
 */
export function argumentsOf(
  fields: readonly ArgField[],
  draft: ArgDraft,
  original: Record<string, unknown> = {},
): { arguments: Record<string, unknown>; problems: string[] } {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const field of fields) {
    const value = draft[field.name];
    if (field.kind === "boolean") {
      if (value === true || field.name in original || field.required) out[field.name] = value === true;
      continue;
    }
    const text = typeof value === "string" ? value : "";
    if (text.trim() === "") {
      if (field.required) problems.push(`${field.name}: required`);
      continue;
    }
    if (field.kind === "string" || field.kind === "enum") out[field.name] = text;
    else if (field.kind === "number" || field.kind === "integer") {
      const n = Number(text);
      if (!Number.isFinite(n)) problems.push(`${field.name}: not a number`);
      else if (field.kind === "integer" && !Number.isInteger(n)) problems.push(`${field.name}: not a whole number`);
      else out[field.name] = n;
    } else {
      try {
        out[field.name] = JSON.parse(text);
      } catch {
        problems.push(`${field.name}: not valid JSON`);
      }
    }
  }
  return { arguments: out, problems };
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  const o = obj(value);
  if (o) return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(",")}}`;
  return JSON.stringify(value);
}

export const sameArguments = (a: unknown, b: unknown): boolean => canonical(a) === canonical(b);

export interface Decision {
  decision: "approve" | "reject";
  /** The form's arguments: sent only when they differ from the model's. */
  arguments?: Record<string, unknown>;
  message?: string;
  /** "always in this session". */
  rememberSession?: boolean;
}

/** The body of `POST /approvals/{id}`: `arguments` only when edited, `remember` only when ticked. */
export function decisionBody(approval: Pick<Approval, "arguments">, d: Decision): Record<string, unknown> {
  const body: Record<string, unknown> = { decision: d.decision };
  if (d.decision === "approve" && d.arguments && !sameArguments(d.arguments, approval.arguments)) body.arguments = d.arguments;
  if (d.message?.trim()) body.message = d.message.trim();
  if (d.decision === "approve" && d.rememberSession) body.remember = "session";
  return body;
}

/** `23h 59m`, `4m 05s`, `12s` left until `expiresAt` (Unix seconds); `expired` once past. */
export function timeLeft(expiresAt: number, nowMs: number): string {
  const seconds = Math.floor(expiresAt - nowMs / 1000);
  if (seconds <= 0) return "expired";
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (h) return `${h}h ${String(m).padStart(2, "0")}m`;
  if (m) return `${m}m ${String(s).padStart(2, "0")}s`;
  return `${s}s`;
}

/** The tool's schema from the catalog (`GET /agents`), `null` when the agent is not listed. */
export function toolOf(
  catalog: readonly { agentId: string; tools: readonly ToolSchema[] }[],
  agentId: string,
  toolName: string,
): ToolSchema | null {
  return catalog.find((e) => e.agentId === agentId)?.tools.find((t) => t.name === toolName) ?? null;
}

export interface Refusal {
  /** `invalid`: the edit does not fit (422, the card stays open); `decided`: someone else decided (409); `gone`: 404. */
  kind: "invalid" | "decided" | "gone" | "other";
  message: string;
  /** The decision that stands (409). */
  stands?: Approval;
}

/** What a failed decision means for the card. */
export function refusalOf(error: unknown): Refusal {
  if (!(error instanceof ApiError)) return { kind: "other", message: error instanceof Error ? error.message : String(error) };
  const detail = obj(obj(error.body)?.detail);
  if (error.status === 409) {
    const stands = obj(detail?.approval) as Approval | null;
    const who = stands?.status ?? "decided";
    const reason = stands?.message ? ` (reason: ${stands.message})` : "";
    const edited = stands?.edited_arguments ? ` with arguments ${JSON.stringify(stands.edited_arguments)}` : "";
    return {
      kind: "decided",
      message: `Decided elsewhere: ${who}${edited}${reason}`,
      ...(stands ? { stands } : {}),
    };
  }
  if (error.status === 422) {
    const text = typeof obj(error.body)?.detail === "string" ? String(obj(error.body)!.detail) : error.message;
    return { kind: "invalid", message: `Invalid edit: ${text}` };
  }
  if (error.status === 404) return { kind: "gone", message: `No such approval any more: ${error.message}` };
  return { kind: "other", message: error.message };
}

/** The tools of an agent with a call waiting for a decision (sorted, once each), for its canvas node. */
export function awaitingTools(
  cards: Readonly<Record<string, { approval: Pick<Approval, "agent_id" | "tool_name" | "status">; phase: string }>>,
  agentId: string,
): string[] {
  const names = Object.values(cards)
    .filter((c) => c.approval.agent_id === agentId && c.phase !== "decided" && (c.approval.status ?? "pending") === "pending")
    .map((c) => c.approval.tool_name);
  return [...new Set(names)].sort();
}
