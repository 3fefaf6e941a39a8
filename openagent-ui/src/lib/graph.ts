/**
 * The canvas graph: the orchestrator at the centre, the built-in query client on its left,
 * agent nodes around them, and links from agents to the orchestrator. Pure functions over
 * React Flow's node and edge objects.
 */
import type { Edge, Node, XYPosition } from "@xyflow/react";

export const ORCHESTRATOR_ID = "orchestrator";
export const QUERY_CLIENT_ID = "query-client";
const AGENT_PREFIX = "agent:";
const QUERY_CLIENT_EDGE = "link:query-client";

export type OrchestratorData = { label: string };
export type QueryClientData = { label: string };
/** Only the agent id: status and tools are read from the store's catalog, so a refresh does not rebuild nodes. */
export type AgentData = { agentId: string };

export type OrchestratorNode = Node<OrchestratorData, "orchestrator">;
export type QueryClientNode = Node<QueryClientData, "queryClient">;
export type AgentNode = Node<AgentData, "agent">;
export type AppNode = OrchestratorNode | QueryClientNode | AgentNode;

export const agentNodeId = (agentId: string): string => `${AGENT_PREFIX}${agentId}`;

export function agentIdOf(nodeId: string): string | null {
  return nodeId.startsWith(AGENT_PREFIX) ? nodeId.slice(AGENT_PREFIX.length) : null;
}

export function isAgentNode(node: AppNode): node is AgentNode {
  return node.type === "agent";
}

/** The two nodes every canvas has. They cannot be deleted. */
export function baseNodes(): AppNode[] {
  return [
    {
      id: ORCHESTRATOR_ID,
      type: "orchestrator",
      position: { x: 0, y: 0 },
      data: { label: "Orchestrator" },
      ariaLabel: "Orchestrator",
      deletable: false,
    },
    {
      id: QUERY_CLIENT_ID,
      type: "queryClient",
      position: { x: -420, y: 0 },
      data: { label: "Query Client" },
      ariaLabel: "Query Client",
      deletable: false,
    },
  ];
}

export function baseEdges(): Edge[] {
  return [
    {
      id: QUERY_CLIENT_EDGE,
      source: QUERY_CLIENT_ID,
      target: ORCHESTRATOR_ID,
      deletable: false,
      animated: true,
    },
  ];
}

export function agentNode(agentId: string, position: XYPosition): AgentNode {
  return { id: agentNodeId(agentId), type: "agent", position, data: { agentId }, ariaLabel: `Agent ${agentId}` };
}

export function linkEdge(agentId: string): Edge {
  return { id: `link:${agentId}`, source: agentNodeId(agentId), target: ORCHESTRATOR_ID };
}

/** The agent id a proposed connection would link to the orchestrator, or null when it is not such a link. */
export function linkedAgentOf(connection: { source: string | null; target: string | null }): string | null {
  const { source, target } = connection;
  if (source === null || target === null) return null;
  if (target === ORCHESTRATOR_ID) return agentIdOf(source);
  if (source === ORCHESTRATOR_ID) return agentIdOf(target);
  return null;
}

/** Agent ids linked to the orchestrator, sorted: the query's `allowed_agent_ids`. */
export function linkedAgentIds(edges: readonly Edge[]): string[] {
  const ids = new Set<string>();
  for (const edge of edges) {
    const agentId = linkedAgentOf(edge);
    if (agentId !== null) ids.add(agentId);
  }
  return [...ids].sort();
}

export function hasLink(edges: readonly Edge[], agentId: string): boolean {
  return edges.some((edge) => linkedAgentOf(edge) === agentId);
}

/** Agent ids that have a node on the canvas. */
export function canvasAgentIds(nodes: readonly AppNode[]): string[] {
  return nodes.filter(isAgentNode).map((node) => node.data.agentId);
}

const RING_GAP = 170;
const FIRST_RING = 300;
const SLOT = 190;

/**
 * Free positions for `count` new agents, on rings right of and around the orchestrator,
 * avoiding the positions already taken (roughly: a slot is taken when a node is within half a slot).
 */
export function ringPositions(count: number, taken: readonly XYPosition[] = []): XYPosition[] {
  const result: XYPosition[] = [];
  const used = [...taken];
  const free = (p: XYPosition) => used.every((q) => Math.abs(q.x - p.x) > SLOT / 2 || Math.abs(q.y - p.y) > 60);
  for (let ring = 0; result.length < count && ring < 200; ring++) {
    const radius = FIRST_RING + ring * RING_GAP;
    const slots = Math.max(6, Math.floor((2 * Math.PI * radius) / SLOT));
    for (let i = 0; i < slots && result.length < count; i++) {
      // Start at the right (angle 0) and fill both ways, keeping the query client's side (left) last.
      const k = i % 2 === 0 ? i / 2 : -(i + 1) / 2;
      const angle = (2 * Math.PI * k) / slots;
      const p = { x: Math.round(radius * Math.cos(angle)), y: Math.round(radius * Math.sin(angle) * 0.75) };
      if (free(p)) {
        result.push(p);
        used.push(p);
      }
    }
  }
  return result;
}

/** Remove nodes (never the two built-in ones) and the edges that touch them. */
export function removeNodes(
  nodes: readonly AppNode[],
  edges: readonly Edge[],
  nodeIds: ReadonlySet<string>,
): { nodes: AppNode[]; edges: Edge[] } {
  const removable = new Set([...nodeIds].filter((id) => id !== ORCHESTRATOR_ID && id !== QUERY_CLIENT_ID));
  return {
    nodes: nodes.filter((node) => !removable.has(node.id)),
    edges: edges.filter((edge) => !removable.has(edge.source) && !removable.has(edge.target)),
  };
}
