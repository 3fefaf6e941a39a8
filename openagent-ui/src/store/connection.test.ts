import { describe, expect, it } from "vitest";
import { base, fakeMaster } from "./fakes";
import { createAppStore } from "./store";

describe("store: connect", () => {
  it("shows the master's 401 message for a wrong key", async () => {
    const master = fakeMaster({ key: "right" });
    const store = createAppStore({ ...base, fetch: master.fetch });
    expect(await store.getState().connect("http://m", "wrong")).toBe(false);
    expect(store.getState().connection).toBe("error");
    expect(store.getState().connectionError).toBe("401 Unauthorized: the master refused the API key: missing or invalid API key");
  });

  it("loads agents, models and the RAG rows, sending the key on every request", async () => {
    const master = fakeMaster({ key: "k" });
    const store = createAppStore({ ...base, fetch: master.fetch });
    expect(await store.getState().connect("http://m/", "k")).toBe(true);
    const s = store.getState();
    expect(s.catalog.map((e) => e.label)).toEqual(["demo", "RAG · Extractor", "RAG · Indexer"]);
    expect(s.models).toEqual(["gpt-4o-mini", "gpt-4o"]);
    expect(s.model).toBe("gpt-4o-mini");
    expect(master.calls.filter((c) => c.path !== "/health").every((c) => c.auth === "Bearer k")).toBe(true);
  });
});

describe("store: polling", () => {
  it("a master that stops answering is one error with a retry, then 'Reconnected' when it answers again", async () => {
    const master = fakeMaster();
    let down = false;
    const fetch = async (url: string, init?: RequestInit) => {
      if (down) throw new TypeError("Failed to fetch");
      return master.fetch(url, init);
    };
    const store = createAppStore({ ...base, fetch });
    await store.getState().connect("http://m", "");
    down = true;
    await store.getState().refresh();
    await store.getState().refresh();
    expect(store.getState().lost).toBe(true);
    expect(store.getState().notices.filter((n) => n.level === "error")).toHaveLength(1);
    expect(store.getState().notices.at(-1)?.retry).toBe(true);
    down = false;
    await store.getState().refresh();
    expect(store.getState().lost).toBe(false);
    expect(store.getState().notices.at(-1)?.text).toBe("Reconnected to the master");
  });

  it("disconnect forgets the key and the live rows", async () => {
    const storage = new Map<string, string>();
    const store = createAppStore({
      ...base,
      storage: { getItem: (k) => storage.get(k) ?? null, setItem: (k, v) => void storage.set(k, v), removeItem: (k) => void storage.delete(k) },
      fetch: fakeMaster().fetch,
    });
    await store.getState().connect("http://m", "k");
    expect([...storage.values()]).toEqual([JSON.stringify({ baseUrl: "http://m", apiKey: "k" })]);
    store.getState().disconnect();
    expect(storage.size).toBe(0);
    expect(store.getState()).toMatchObject({ connection: "disconnected", apiKey: "", api: null, liveRows: [] });
    expect(store.getState().catalog.map((e) => e.agentId)).not.toContain("demo");
  });
});
