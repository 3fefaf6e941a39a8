import { describe, expect, it } from "vitest";
import { agentRow, discoveredRow } from "../api/fixtures";
import { base, connected } from "./fakes";
import { createAppStore } from "./store";

describe("store: discovery problems", () => {
  it("keeps GET /agents/discover's per-file errors for the sidebar", async () => {
    const { store } = await connected();
    expect(store.getState().discoveryErrors).toEqual([{ file: "agents/broken.py", error: "line 3: invalid syntax", module: "agents.broken" }]);
  });
});

describe("store: catalog", () => {
  it("an agent linked on the canvas going DOWN is an error notice naming it and its last error", async () => {
    const store = createAppStore(base);
    await store.getState().link("a");
    store.getState().setCatalog({ liveRows: [agentRow({ agent_id: "a", connection_type: "invocation", status: "UP" }), agentRow({ agent_id: "b", connection_type: "invocation", status: "UP" })] });
    expect(store.getState().catalogById.a?.status).toBe("UP");
    store.getState().setCatalog({
      liveRows: [
        agentRow({ agent_id: "a", connection_type: "invocation", status: "DOWN", last_error: "health check failed" }),
        agentRow({ agent_id: "b", connection_type: "invocation", status: "DOWN" }),
      ],
    });
    // b is not on the canvas: no notice for it.
    expect(store.getState().notices.map((n) => [n.level, n.text])).toEqual([["error", "Agent a is DOWN: health check failed"]]);
  });

  it("merges live rows, discovery and an imported workspace, and filters nothing by itself", () => {
    const store = createAppStore(base);
    store.getState().setDiscovery({ agents: [discoveredRow({ agent_id: "w", module: "agents.w" })], errors: [] });
    store.getState().setCatalog({ liveRows: [agentRow({ agent_id: "live", status: "UP" })] });
    store.getState().setSearch("zzz");
    expect(Object.keys(store.getState().catalogById)).toEqual(expect.arrayContaining(["w", "live"]));
    expect(store.getState().search).toBe("zzz");
  });
});
