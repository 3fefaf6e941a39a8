import { describe, expect, it, vi } from "vitest";
import { json } from "./fakes";
import { createAppStore } from "./store";

function memoryStorage(initial: Record<string, string>) {
  const items = new Map(Object.entries(initial));
  return {
    getItem: (key: string) => items.get(key) ?? null,
    setItem: (key: string, value: string) => void items.set(key, value),
    removeItem: (key: string) => void items.delete(key),
    items,
  };
}

function master(sessionStatus = 200) {
  const paths: string[] = [];
  const fetch = async (url: string) => {
    const path = new URL(url).pathname;
    paths.push(path);
    if (path === "/health") return json({ status: "ok" });
    if (path === "/agents") return json({ agents: [] });
    if (path === "/sessions/s1")
      return sessionStatus === 200
        ? json({ session_id: "s1", turns: [{ query: "plan it", query_id: "q1", decision: "final_answer", answer: "done", run_id: "run_1" }] })
        : json({ detail: "unknown or expired session 's1'", error_code: "unknown_session" }, sessionStatus);
    if (path === "/runs/run_1")
      return json({ run_id: "run_1", state: "completed", roles: { phase: "complete", subtasks: [{ task: "step", status: "passed", attempts: 1 }] } });
    return json({ detail: "not found" }, 404);
  };
  return { fetch, paths };
}

describe("a kept session after a reload", () => {
  it("comes back with the checklist of its run with roles", async () => {
    const storage = memoryStorage({ "openagent.ui.session": "s1" });
    const m = master();
    const store = createAppStore({ storage, pollMs: 0, fetch: m.fetch });
    expect(await store.getState().connect("http://master", "")).toBe(true);
    await vi.waitFor(() => expect(store.getState().transcript).toHaveLength(2));
    const [question, answer] = store.getState().transcript;
    expect(question).toMatchObject({ kind: "user", text: "plan it" });
    expect(answer).toMatchObject({ kind: "assistant", text: "done", state: "done", checklist: [{ task: "step", state: "passed", attempt: 1 }] });
    expect(store.getState().sessionId).toBe("s1");
    expect(m.paths).toContain("/runs/run_1");
  });

  it("is forgotten when the master no longer knows it", async () => {
    const storage = memoryStorage({ "openagent.ui.session": "s1" });
    const m = master(404);
    const store = createAppStore({ storage, pollMs: 0, fetch: m.fetch });
    await store.getState().connect("http://master", "");
    await vi.waitFor(() => expect(storage.items.has("openagent.ui.session")).toBe(false));
    expect(store.getState().transcript).toEqual([]);
    expect(store.getState().sessionId).toBeNull();
  });
});
