import { describe, expect, it } from "vitest";
import { connected, json } from "./fakes";

const me = (role: string) => ({ key_id: "key_1", name: "ci bot", role, tenant: "team-a", agent_ids: [] });
const row = { key_id: "key_2", name: "wall screen", role: "viewer", tenant: "default", agent_ids: [], created: 1, last_used: null };

describe("store: keys and identity", () => {
  it("reads who the key is at connect; a client key is no administrator", async () => {
    const { store } = await connected([(c) => (c.path === "/whoami" ? json(me("client")) : undefined)]);
    expect(store.getState().identity).toMatchObject({ name: "ci bot", role: "client", tenant: "team-a" });
    expect(store.getState().isAdmin()).toBe(false);
    store.getState().disconnect();
    expect(store.getState().identity).toBeNull();
  });

  it("a viewer key may not query: no approvals are asked for (GET /approvals would be refused)", async () => {
    const { master, store } = await connected([(c) => (c.path === "/whoami" ? json(me("viewer")) : undefined)]);
    expect(store.getState().canQuery()).toBe(false);
    expect(store.getState().isAdmin()).toBe(false);
    store.getState().setApprovalsPanelOpen(true);
    await store.getState().loadPendingApprovals();
    expect(master.calls.filter((c) => c.path.startsWith("/approvals"))).toEqual([]);
    expect(store.getState().approvalsError).toBeNull();
  });

  it("client and admin keys may query; an agent key may not", async () => {
    for (const [role, may] of [["client", true], ["admin", true], ["agent", false]] as const) {
      const { store } = await connected([(c) => (c.path === "/whoami" ? json(me(role)) : undefined)]);
      expect(store.getState().canQuery(), role).toBe(may);
    }
  });

  it("a master without /whoami (no roles) leaves every feature on", async () => {
    const { store } = await connected();
    expect(store.getState().identity).toBeNull();
    expect(store.getState().isAdmin()).toBe(true);
    expect(store.getState().canQuery()).toBe(true);
  });

  it("lists, creates (secret shown once) and revokes keys", async () => {
    const rows = [row];
    const { master, store } = await connected([
      (c) => (c.path === "/whoami" ? json(me("admin")) : undefined),
      (c) => (c.path === "/keys" && c.method === "GET" ? json({ keys: rows }) : undefined),
      (c) =>
        c.path === "/keys" && c.method === "POST"
          ? json({ ...row, key_id: "key_3", name: "new", role: "client", secret: "oak_s3cret" }, 201)
          : undefined,
      (c) => (c.path === "/keys/key_2" && c.method === "DELETE" ? json({ key_id: "key_2", revoked: true }) : undefined),
    ]);
    await store.getState().openKeys();
    expect(store.getState().keys).toMatchObject({ open: true, rows, busy: false, error: null });
    expect(await store.getState().createKey({ name: "new", role: "client", tenant: "default", agent_ids: [] })).toBe(true);
    expect(master.calls.find((c) => c.method === "POST" && c.path === "/keys")?.body).toEqual({
      name: "new",
      role: "client",
      tenant: "default",
      agent_ids: [],
    });
    expect(store.getState().keys.created?.secret).toBe("oak_s3cret");
    await store.getState().revokeKey("key_2");
    expect(master.calls.some((c) => c.method === "DELETE" && c.path === "/keys/key_2")).toBe(true);
    store.getState().closeKeys();
    expect(store.getState().keys.created).toBeNull(); // the secret is dropped with the panel
  });

  it("a 403 names the role it needs", async () => {
    const refusal = { detail: "GET /keys needs the role 'admin'; key 'ci bot' has the role 'client'", error_code: "forbidden" };
    const { store } = await connected([(c) => (c.path === "/keys" ? json(refusal, 403) : undefined)]);
    await store.getState().openKeys();
    expect(store.getState().keys.error).toBe(
      "403 Forbidden: your key's role does not allow this: GET /keys needs the role 'admin'; key 'ci bot' has the role 'client'",
    );
  });
});
