/** Names for the generated OpenAPI types the UI uses (src/api/schema.d.ts is generated). */
import type { components } from "./schema";

type Schemas = components["schemas"];
export type QueryRequest = Schemas["QueryRequest"];
export type QueryResponse = Schemas["QueryResponse"];
export type Plan = Schemas["Plan"];
export type PlanStep = Schemas["PlanStep"];
export type AgentUsed = Schemas["AgentUsed"];
export type Attachment = Schemas["Attachment"];
export type InvocationRegistration = Schemas["InvocationRegistration"];
export type PromptProfile = NonNullable<QueryRequest["orchestrator_prompt_profile"]>;
/** A stable error code (`error_code` of every refusal). */
export type ErrorCode = Schemas["ErrorCode"];
export type ErrorBody = Schemas["ErrorBody"];

/** One event of a streamed run (`POST /query` with `stream: true`): the union is generated from
 * `components.schemas.RunEvent`, discriminated by `type` (the SSE event's name). */
export type RunEvent = Schemas["RunEvent"];
export type RunEventType = RunEvent["type"];
/** The member of {@link RunEvent} whose `type` is `T`. */
export type RunEventOf<T extends RunEventType> = Extract<RunEvent, { type: T }>;
export type StepEvent = Schemas["StepEvent"];
export type PlanEvent = Schemas["PlanEvent"];
export type SubtaskStartedEvent = Schemas["SubtaskStartedEvent"];
export type VerdictEvent = Schemas["VerdictEvent"];
export type ToolCallEvent = Schemas["ToolCallEvent"];
export type ToolProgressEvent = Schemas["ToolProgressEvent"];
export type ToolResultEvent = Schemas["ToolResultEvent"];
export type TokenEvent = Schemas["TokenEvent"];
export type ApprovalRequiredEvent = Schemas["ApprovalRequiredEvent"];
export type RunPausedEvent = Schemas["RunPausedEvent"];

/** `GET /whoami`: the caller's key (name, role, tenant). */
export type WhoAmI = Schemas["WhoAmI"];
/** A row of `GET /keys` (never a secret). */
export type KeyInfo = Schemas["KeyInfo"];
/** `POST /keys`: the key and its secret, shown once. */
export type CreatedKey = Schemas["CreatedKey"];
/** `POST /keys`'s body. */
export type KeyRequest = Schemas["KeyRequest"];

/** `GET /health`. */
export type Health = Schemas["Health"];
/** `GET /query/orchestrator-models`. */
export type ModelCatalog = Schemas["OrchestratorModels"];
/** `GET /sessions/{session_id}`. */
export type SessionTurns = Schemas["SessionTurns"];
/** `GET /runs/{run_id}`: a run's record (`roles`: the coordinator's state of a run with roles). */
export type RunRecord = Schemas["RunRecord"];
/** `GET /query/session-rag-context`. */
export type SessionRagContext = Schemas["SessionRagContext"];
/** A tool of an agent, in OpenAI function-calling shape. */
export type ToolSchema = Schemas["ToolSchema"];
/** A row of `GET /agents`. */
export type AgentRow = Schemas["AgentRow"];
/** The `sandbox` field of a `GET /agents` row. */
export type SandboxField = Schemas["SandboxField"];
/** `GET /agents/discover`. */
export type Discovery = Schemas["Discovery"];
/** A row of `GET /agents/discover`'s `agents`. */
export type DiscoveredAgent = Schemas["DiscoveredAgent"];
/** A row of `GET /agents/discover`'s `errors`: a file that could not be analysed, or a duplicate id. */
export type DiscoveryProblem = Schemas["DiscoveryProblem"];
/** `GET /generate-agent/models`. */
export type GeneratorModels = Schemas["GeneratorModels"];
/** `POST /generate-agent` (200). */
export type GeneratedAgent = Schemas["GeneratedAgent"];
/** One check of generated code. */
export type Check = Schemas["Check"];
/** `POST /save-agent`. */
export type SavedAgent = Schemas["SavedAgent"];
/** One agent's outcome of a YAML start, stop or a workspace restore. */
export type AgentOutcome = Schemas["AgentOutcome"];
/** `POST /register`. */
export type Registered = Schemas["Registered"];
/** `GET /internal/sandbox/status`. */
export type SandboxStatus = Schemas["SandboxStatus"];
/** `POST /internal/sandbox-agent/start`. */
export type SandboxStarted = Schemas["SandboxStarted"];
/** `POST /internal/sandbox-agent/stop`. */
export type SandboxStopped = Schemas["SandboxStopped"];
/** `GET /internal/sandbox-agent/logs`. */
export type SandboxLogs = Schemas["SandboxLogs"];
/** A tool call waiting for a person's decision (`GET /approvals`, a paused query's `approvals`). */
export type Approval = Schemas["Approval"];
