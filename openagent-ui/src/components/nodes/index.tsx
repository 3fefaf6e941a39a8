/** Every node type of the canvas, registered in one place. */
import type { NodeTypes } from "@xyflow/react";
import { AgentNodeView } from "./AgentNode";
import { OrchestratorNodeView } from "./OrchestratorNode";
import { QueryClientNodeView } from "./QueryClientNode";

export type { AppNode } from "../../lib/graph";

export const nodeTypes = {
  orchestrator: OrchestratorNodeView,
  queryClient: QueryClientNodeView,
  agent: AgentNodeView,
} satisfies NodeTypes;
