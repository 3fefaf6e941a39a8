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
