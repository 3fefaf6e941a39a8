/**
 * The master's HTTP API as the page uses it. Every request carries the API key
 * (`Authorization: Bearer`); every failure becomes an {@link ApiError} with the master's
 * own message, so the page can show it.
 */
import { discoveryProblems } from "../lib/builder";
import { SseParser, runEventOf } from "../lib/sse";
import type {
  AgentOutcome,
  AgentRow,
  Approval,
  CreatedKey,
  KeyInfo,
  KeyRequest,
  WhoAmI,
  DiscoveredAgent,
  Discovery,
  ErrorCode,
  GeneratedAgent,
  GeneratorModels,
  Health,
  InvocationRegistration,
  ModelCatalog,
  QueryRequest,
  QueryResponse,
  Registered,
  RunEvent,
  SandboxLogs,
  SandboxStarted,
  SandboxStatus,
  SandboxStopped,
  SavedAgent,
  RunRecord,
  SessionRagContext,
  SessionTurns,
} from "./types";

export type { CreatedKey, Discovery, Health, KeyInfo, KeyRequest, ModelCatalog, SessionTurns, WhoAmI };
/** One agent's outcome of `POST /internal/yaml-agents/start`. */
export type YamlAgentOutcome = AgentOutcome;

export class ApiError extends Error {
  constructor(
    /** HTTP status; 0 when the master could not be reached. */
    readonly status: number,
    message: string,
    /** The refusal's `error_code` (see docs/reference/errors.md); `null` when the body had none. */
    readonly code: ErrorCode | string | null = null,
    /** The parsed response body (JSON when it was JSON), for callers that show more of it. */
    readonly body: unknown = null,
  ) {
    super(message);
    this.name = "ApiError";
  }

  get lostConnection(): boolean {
    return this.status === 0;
  }
}

const STATUS_HINTS: Record<number, string> = {
  400: "400 Bad request",
  401: "401 Unauthorized: the master refused the API key",
  403: "403 Forbidden: the master refused it",
  404: "404 Not found",
  413: "413 Too large: the request is over the master's size limit",
  422: "422 Invalid request",
  502: "502 Bad gateway: the LLM provider failed",
  503: "503 Unavailable",
};

/** "<status hint>: <master's message>" from an error response body. */
export function errorMessage(status: number, body: unknown): { message: string; code: string | null } {
  let detail = "";
  let code: string | null = null;
  if (body && typeof body === "object") {
    const b = body as Record<string, unknown>;
    if (typeof b.detail === "string") detail = b.detail;
    else if (Array.isArray(b.detail))
      detail = b.detail
        .map((d: { loc?: unknown[]; msg?: string }) => `${(d.loc ?? []).slice(1).join(".")}: ${d.msg ?? ""}`)
        .join("; ");
    else if (b.detail && typeof b.detail === "object") {
      // {code, message} from the builder and workspace routes; {problems: [{line, field, message}]} for a bad YAML.
      const d = b.detail as Record<string, unknown>;
      if (typeof d.message === "string") detail = d.message;
      if (typeof d.code === "string") code = d.code;
      if (Array.isArray(d.problems) && d.problems.length) {
        const lines = (d.problems as { line?: number | null; field?: string; message?: string }[]).map(
          (p) => `${p.line ? `line ${p.line}: ` : ""}${p.field ? `${p.field}: ` : ""}${p.message ?? ""}`,
        );
        detail = [detail, ...lines].filter(Boolean).join("\n");
      }
    } else if (typeof b.error === "string") detail = b.error;
    if (typeof b.error_code === "string") code = b.error_code;
  } else if (typeof body === "string") detail = body.slice(0, 300);
  // A role's refusal names the role it needs in the master's message.
  const hint =
    status === 403 && code === "forbidden"
      ? "403 Forbidden: your key's role does not allow this"
      : (STATUS_HINTS[status] ?? `HTTP ${status}`);
  return { message: detail ? `${hint}: ${detail}` : hint, code };
}


export interface StreamHandlers {
  /** Each event of the stream, typed from the master's schema (its `type` is the SSE event's name). */
  onEvent(event: RunEvent): void;
}

export interface ApiClient {
  readonly baseUrl: string;
  readonly hasKey: boolean;
  health(): Promise<Health>;
  /** `GET /whoami`: who the key is (name, role, tenant). */
  whoami(): Promise<WhoAmI>;
  /** `GET /keys` (administrators). */
  keys(): Promise<KeyInfo[]>;
  /** `POST /keys`: the new key with its secret, shown once. */
  createKey(body: KeyRequest): Promise<CreatedKey>;
  /** `DELETE /keys/{key_id}`. */
  revokeKey(keyId: string): Promise<void>;
  agents(): Promise<AgentRow[]>;
  /** `GET /agents/discover`; `null` when this master has no discovery (404). */
  discover(): Promise<Discovery | null>;
  /** `GET /generate-agent/models` (403 for a key that is not an administrator's). */
  generatorModels(): Promise<GeneratorModels>;
  /** `POST /generate-agent`: the answer as sent; a 422's body is on the {@link ApiError}. */
  generateAgent(body: Record<string, unknown>): Promise<GeneratedAgent>;
  /** `POST /save-agent` (400 `file_exists` without `overwrite`). */
  saveAgent(body: { module: string; source: string; overwrite: boolean }): Promise<SavedAgent>;
  /** `POST /internal/workspace/restore`: per agent registered, unreachable, invalid or skipped. */
  restoreWorkspace(yaml: string): Promise<AgentOutcome[]>;
  models(): Promise<ModelCatalog>;
  register(body: InvocationRegistration): Promise<Registered>;
  /** Streamed `POST /query`; resolves with the final `query_result`. */
  query(body: QueryRequest, handlers: StreamHandlers, signal?: AbortSignal): Promise<QueryResponse>;
  session(sessionId: string): Promise<SessionTurns>;
  /** `GET /runs/{run_id}`: the run's record. */
  run(runId: string): Promise<RunRecord>;
  deleteSession(sessionId: string): Promise<boolean>;
  /** `GET /query/session-rag-context`: the session's attached files and their indexing state. */
  sessionRagContext(sessionId: string): Promise<SessionRagContext>;
  /** `GET /approvals`: the session's approvals; without a session, the pending ones of every session. */
  approvals(sessionId?: string): Promise<Approval[]>;
  /**
   * `POST /approvals/{id}`: the run's result when this decision completes its round (else the
   * round's approvals, `status: "awaiting_approval"`). 409: decided elsewhere; 422: invalid edit.
   */
  decideApproval(approvalId: string, body: Record<string, unknown>): Promise<QueryResponse>;
  /** `POST /internal/yaml-agents/start`: run a workspace's WebSocket agents inside the master. */
  startYamlAgents(yaml: string): Promise<YamlAgentOutcome[]>;
  /** `GET /internal/sandbox/status`; `null` when this master has no sandbox (404). */
  sandboxStatus(): Promise<SandboxStatus | null>;
  /** `POST /internal/sandbox-agent/start` (sandbox issue). */
  sandboxStart(body: { agent_id: string; module?: string; placement?: string }): Promise<SandboxStarted>;
  /** `POST /internal/sandbox-agent/stop`: tear down the agent's Pod and ConfigMap, or its pool placement. */
  sandboxStop(agentId: string): Promise<SandboxStopped>;
  /** `GET /internal/sandbox-agent/logs`: the agent container's (or pool runner's) log tail. */
  sandboxLogs(agentId: string, tailLines?: number): Promise<SandboxLogs>;
}

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export function createApiClient(options: { baseUrl: string; apiKey: string; fetch?: FetchLike }): ApiClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const doFetch: FetchLike = options.fetch ?? ((input, init) => fetch(input, init));
  const headers = (extra: Record<string, string> = {}): Record<string, string> =>
    options.apiKey ? { Authorization: `Bearer ${options.apiKey}`, ...extra } : extra;

  async function send(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
    const init: RequestInit = {
      method,
      headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }),
    };
    if (body !== undefined) init.body = JSON.stringify(body);
    if (signal) init.signal = signal;
    try {
      return await doFetch(`${baseUrl}${path}`, init);
    } catch (error) {
      if ((error as Error).name === "AbortError") throw error;
      throw new ApiError(0, `lost connection to the master at ${baseUrl || "this page's origin"} (${(error as Error).message})`);
    }
  }

  async function failure(response: Response): Promise<ApiError> {
    const text = await response.text().catch(() => "");
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON: keep the text */
    }
    const { message, code } = errorMessage(response.status, body);
    return new ApiError(response.status, message, code, body);
  }

  async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await send(method, path, body);
    if (!response.ok) throw await failure(response);
    return (await response.json()) as T;
  }

  async function optional<T>(path: string): Promise<T | null> {
    const response = await send("GET", path);
    if (response.status === 404 || response.status === 405) return null;
    if (!response.ok) throw await failure(response);
    return (await response.json()) as T;
  }

  return {
    baseUrl,
    hasKey: options.apiKey !== "",
    health: () => json<Health>("GET", "/health"),
    whoami: () => json<WhoAmI>("GET", "/whoami"),
    keys: async () => (await json<{ keys: KeyInfo[] }>("GET", "/keys")).keys,
    createKey: (body) => json<CreatedKey>("POST", "/keys", body),
    revokeKey: async (keyId) => {
      await json("DELETE", `/keys/${encodeURIComponent(keyId)}`);
    },
    agents: async () => (await json<{ agents: AgentRow[] }>("GET", "/agents")).agents,
    discover: async () => {
      const found = await optional<{ agents?: DiscoveredAgent[]; errors?: unknown } | DiscoveredAgent[]>("/agents/discover");
      if (found === null) return null;
      if (Array.isArray(found)) return { agents: found, errors: [] };
      return { agents: found.agents ?? [], errors: discoveryProblems(found.errors) };
    },
    generatorModels: async () => {
      const raw = await json<Partial<GeneratorModels>>("GET", "/generate-agent/models");
      return {
        default_model: raw.default_model ?? "",
        allowed_models: raw.allowed_models ?? [],
        available: raw.available !== false,
      };
    },
    generateAgent: (body) => json("POST", "/generate-agent", body),
    saveAgent: (body) => json("POST", "/save-agent", body),
    restoreWorkspace: async (yaml) =>
      (await json<{ agents?: AgentOutcome[] }>("POST", "/internal/workspace/restore", { yaml })).agents ?? [],
    models: () => json<ModelCatalog>("GET", "/query/orchestrator-models"),
    register: (body) => json("POST", "/register", body),
    session: (sessionId) => json<SessionTurns>("GET", `/sessions/${encodeURIComponent(sessionId)}`),
    run: (runId) => json<RunRecord>("GET", `/runs/${encodeURIComponent(runId)}`),
    deleteSession: async (sessionId) => {
      const response = await send("DELETE", `/sessions/${encodeURIComponent(sessionId)}`);
      if (response.status === 404) return false;
      if (!response.ok) throw await failure(response);
      return true;
    },
    sessionRagContext: (sessionId) =>
      json("GET", `/query/session-rag-context?session_id=${encodeURIComponent(sessionId)}`),
    approvals: async (sessionId) =>
      (await json<{ approvals?: Approval[] }>("GET", `/approvals${sessionId ? `?session_id=${encodeURIComponent(sessionId)}` : ""}`))
        .approvals ?? [],
    decideApproval: (approvalId, body) => json("POST", `/approvals/${encodeURIComponent(approvalId)}`, body),
    startYamlAgents: async (yaml) =>
      (await json<{ agents?: YamlAgentOutcome[] }>("POST", "/internal/yaml-agents/start", { yaml })).agents ?? [],
    sandboxStatus: () => optional("/internal/sandbox/status"),
    sandboxStart: (body) => json("POST", "/internal/sandbox-agent/start", body),
    sandboxStop: (agentId) => json("POST", "/internal/sandbox-agent/stop", { agent_id: agentId }),
    sandboxLogs: async (agentId, tailLines = 200) => {
      const answer = await json<SandboxLogs>(
        "GET",
        `/internal/sandbox-agent/logs?agent_id=${encodeURIComponent(agentId)}&tail_lines=${tailLines}`,
      );
      return { ...answer, lines: answer.lines ?? [] };
    },
    async query(body, handlers, signal) {
      const response = await send("POST", "/query", { ...body, stream: true }, signal);
      const type = response.headers.get("content-type") ?? "";
      if (!type.includes("text/event-stream")) {
        // A refusal before streaming started (401, 403, 413, 422...) or a JSON answer.
        if (!response.ok) throw await failure(response);
        return (await response.json()) as QueryResponse;
      }
      if (!response.body) throw new ApiError(response.status, "the master sent an empty stream");
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      const parser = new SseParser();
      let result: QueryResponse | null = null;
      const dispatch = (text: string) => {
        for (const event of parser.feed(text)) {
          const parsed = runEventOf(event.event, event.data);
          if (parsed === null) continue;
          handlers.onEvent(parsed);
          if (parsed.type === "query_result") result = parsed;
        }
      };
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          dispatch(decoder.decode(value, { stream: true }));
        }
        dispatch(decoder.decode());
      } catch (error) {
        if ((error as Error).name === "AbortError") throw error;
        throw new ApiError(0, `lost connection to the master while streaming (${(error as Error).message})`);
      }
      if (result === null) throw new ApiError(0, "the stream ended without a query_result: the connection was lost");
      return result;
    },
  };
}
