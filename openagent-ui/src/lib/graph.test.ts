import { describe, expect, it } from "vitest";
import {
  ORCHESTRATOR_ID,
  QUERY_CLIENT_ID,
  agentNode,
  baseEdges,
  baseNodes,
  linkEdge,
  linkedAgentIds,
  linkedAgentOf,
  removeNodes,
  ringPositions,
} from "./graph";
import { emptyHistory, record, redo, undo } from "./history";

describe("graph", () => {
  it("has the orchestrator at the centre and the query client on its left", () => {
    const [orchestrator, client] = baseNodes();
    expect(orchestrator).toMatchObject({ id: ORCHESTRATOR_ID, position: { x: 0, y: 0 }, deletable: false });
    expect(client?.id).toBe(QUERY_CLIENT_ID);
    expect(client!.position.x).toBeLessThan(0);
  });

  it("accepts only agent-orchestrator links, either way round", () => {
    expect(linkedAgentOf({ source: "agent:a", target: ORCHESTRATOR_ID })).toBe("a");
    expect(linkedAgentOf({ source: ORCHESTRATOR_ID, target: "agent:b" })).toBe("b");
    expect(linkedAgentOf({ source: "agent:a", target: "agent:b" })).toBeNull();
    expect(linkedAgentOf({ source: QUERY_CLIENT_ID, target: ORCHESTRATOR_ID })).toBeNull();
  });

  it("scopes queries to linked agents only, sorted and unique", () => {
    const edges = [...baseEdges(), linkEdge("z"), linkEdge("a"), linkEdge("a")];
    expect(linkedAgentIds(edges)).toEqual(["a", "z"]);
  });

  it("never removes the built-in nodes, and drops the edges of removed nodes", () => {
    const nodes = [...baseNodes(), agentNode("a", { x: 1, y: 1 })];
    const edges = [...baseEdges(), linkEdge("a")];
    const after = removeNodes(nodes, edges, new Set([ORCHESTRATOR_ID, "agent:a"]));
    expect(after.nodes.map((n) => n.id)).toEqual([ORCHESTRATOR_ID, QUERY_CLIENT_ID]);
    expect(after.edges.map((e) => e.id)).toEqual(["link:query-client"]);
  });

  it("lays out 200 agents on distinct positions", () => {
    const positions = ringPositions(200, [{ x: 0, y: 0 }]);
    expect(positions).toHaveLength(200);
    expect(new Set(positions.map((p) => `${p.x},${p.y}`)).size).toBe(200);
  });
});

describe("history", () => {
  it("undoes and redoes in order, and a new edit clears redo", () => {
    let h = emptyHistory<number>();
    h = record(h, 1);
    h = record(h, 2);
    const u = undo(h, 3)!;
    expect(u.snapshot).toBe(2);
    const r = redo(u.history, 2)!;
    expect(r.snapshot).toBe(3);
    expect(record(u.history, 2).future).toEqual([]);
    expect(undo(emptyHistory<number>(), 0)).toBeNull();
  });

  it("keeps at most the limit", () => {
    let h = emptyHistory<number>();
    for (let i = 0; i < 10; i++) h = record(h, i, 3);
    expect(h.past).toEqual([7, 8, 9]);
  });
});
