import { describe, expect, it } from "vitest";
import { connected, json } from "./fakes";

describe("store: restore on master", () => {
  it("sends the canvas's workspace YAML and keeps each agent's outcome", async () => {
    const { master, store } = await connected();
    store.getState().addAgent("document-indexer-agent", { x: 100, y: 0 });
    await store.getState().restoreOnMaster();
    const sent = master.calls.find((c) => c.path === "/internal/workspace/restore")?.body;
    expect(sent).toEqual({ yaml: store.getState().exportYaml() });
    expect(String(sent?.yaml)).toContain("agent_id: document-indexer-agent");
    const restore = store.getState().restore;
    expect(restore).toMatchObject({ open: true, phase: "done", error: null });
    expect(restore.outcomes.map((o) => o.status)).toEqual(["registered", "unreachable", "invalid"]);
    expect(store.getState().notices.at(-1)?.text).toBe("Restore on master: 1 registered · 1 unreachable · 1 invalid");
  });

  it("shows the master's refusal: a key that may not restore, or a YAML problem with its line", async () => {
    const off = { detail: "POST /internal/workspace/restore needs the role 'admin'; key 'ops' has the role 'viewer'" };
    const { store } = await connected([(c) => (c.path === "/internal/workspace/restore" ? json(off, 403) : undefined)]);
    await store.getState().restoreOnMaster();
    expect(store.getState().restore).toMatchObject({
      phase: "error",
      error: "403 Forbidden: the master refused it: POST /internal/workspace/restore needs the role 'admin'; key 'ops' has the role 'viewer'",
    });
    const bad = { detail: { code: "invalid", message: "the workspace is invalid", problems: [{ line: 4, field: "agents[0].toolz", message: "unknown field 'toolz'" }] } };
    const other = await connected([(c) => (c.path === "/internal/workspace/restore" ? json(bad, 400) : undefined)]);
    await other.store.getState().restoreOnMaster();
    expect(other.store.getState().restore.error).toBe("400 Bad request: the workspace is invalid\nline 4: agents[0].toolz: unknown field 'toolz'");
  });
});
