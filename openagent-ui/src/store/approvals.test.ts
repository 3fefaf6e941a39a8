import { describe, expect, it, vi } from "vitest";
import { awaitingTools } from "../lib/approvals";
import { connected, json, type Route } from "./fakes";

const APPROVAL = {
  approval_id: "appr-1",
  session_id: "s1",
  agent_id: "bank",
  tool_name: "transfer",
  arguments: { to: "bob", amount: 250 },
  created_at: 1_000,
  expires_at: 4_000_000_000,
  status: "pending",
};
const paused = {
  query_id: "q",
  session_id: "s1",
  success: true,
  status: "awaiting_approval",
  answer: "Waiting for a person to decide: bank.transfer",
  approvals: [APPROVAL],
};
const stream: Route = (c) =>
  c.path === "/query"
    ? new Response(`event: query_result\ndata: ${JSON.stringify(paused)}\n\n`, { headers: { "content-type": "text/event-stream" } })
    : undefined;

async function pausedStore(decide: Route) {
  const { master, store } = await connected([stream, decide, (c) => (c.path === "/approvals" ? json({ approvals: [] }) : undefined)]);
  await store.getState().send("Transfer 250 to bob");
  return { master, store };
}

describe("store: approvals", () => {
  it("a paused query shows a card per held call and marks the tool's agent as awaiting", async () => {
    const { store } = await pausedStore(() => undefined);
    const s = store.getState();
    const entry = s.transcript[1];
    expect(entry).toMatchObject({ kind: "assistant", state: "done", approvalIds: ["appr-1"] });
    expect(s.approvalCards["appr-1"]).toMatchObject({ phase: "pending", error: null });
    expect(awaitingTools(s.approvalCards, "bank")).toEqual(["transfer"]);
  });

  it("approving with an edit sends it, and the run's result joins the chat as an answer", async () => {
    const result = { query_id: "q2", session_id: "s1", success: true, status: "completed", answer: "Sent 200 to bob.", agents_used: [{ agent_id: "bank", tool_name: "transfer" }] };
    const { master, store } = await pausedStore((c) => (c.path === "/approvals/appr-1" ? json(result) : undefined));
    await store.getState().decideApproval("appr-1", { decision: "approve", arguments: { to: "bob", amount: 200 }, rememberSession: true });
    expect(master.calls.find((c) => c.path === "/approvals/appr-1")?.body).toEqual({
      decision: "approve",
      arguments: { to: "bob", amount: 200 },
      remember: "session",
    });
    const s = store.getState();
    expect(s.approvalCards["appr-1"]).toMatchObject({ phase: "decided", approval: { status: "approved" } });
    expect(s.transcript.at(-1)).toMatchObject({ kind: "assistant", state: "done", text: "Sent 200 to bob.", agentsUsed: ["bank"] });
    expect(awaitingTools(s.approvalCards, "bank")).toEqual([]);
    expect(s.busy).toBe(false);
  });

  it("a 422 keeps the card open with the master's message naming the field", async () => {
    const detail = "edited arguments for 'transfer' do not fit its schema: amount: -5 is less than the minimum of 0";
    const { store } = await pausedStore((c) => (c.path === "/approvals/appr-1" ? json({ detail, error_code: "validation_error" }, 422) : undefined));
    await store.getState().decideApproval("appr-1", { decision: "approve", arguments: { to: "bob", amount: -5 } });
    expect(store.getState().approvalCards["appr-1"]).toEqual({ approval: APPROVAL, phase: "pending", error: `Invalid edit: ${detail}` });
    expect(store.getState().notices.at(-1)?.text).toBe(`Invalid edit: ${detail}`);
  });

  it("a 409 closes the card with the decision that stands", async () => {
    const stands = { ...APPROVAL, status: "rejected", message: "not today", decided_at: 2_000 };
    const body = { detail: { message: "approval 'appr-1' was already decided: rejected", approval: stands }, error_code: "approval_decided" };
    const { store } = await pausedStore((c) => (c.path === "/approvals/appr-1" ? json(body, 409) : undefined));
    await store.getState().decideApproval("appr-1", { decision: "approve" });
    expect(store.getState().approvalCards["appr-1"]).toEqual({
      approval: stands,
      phase: "decided",
      error: "Decided elsewhere: rejected (reason: not today)",
    });
    expect(store.getState().transcript).toHaveLength(2); // no answer added
  });

  it("lists the pending approvals of every session for the panel, from the moment it connects", async () => {
    const other = { ...APPROVAL, approval_id: "appr-9", session_id: "s9" };
    const { master, store } = await connected([(c) => (c.path === "/approvals" ? json({ approvals: [other] }) : undefined)]);
    await vi.waitFor(() => expect(store.getState().pendingApprovals).toEqual([other]));
    store.getState().setApprovalsPanelOpen(true);
    await store.getState().loadPendingApprovals();
    expect(store.getState().pendingApprovals).toEqual([other]);
    expect(master.calls.filter((c) => c.path === "/approvals").every((c) => c.method === "GET")).toBe(true);
  });
});
