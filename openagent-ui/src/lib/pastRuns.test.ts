import { describe, expect, it } from "vitest";
import type { RunRecord } from "../api/types";
import { checklistOfRun, pastEntries, pastQueries } from "./pastRuns";

const record: RunRecord = {
  run_id: "run_1",
  state: "completed",
  roles: {
    phase: "complete",
    current: 1,
    subtasks: [
      { task: "do step one", criteria: ["step 1 done"], status: "passed", attempts: 1, verdicts: [{ role: "reviewer", verdict: "pass", reason: "done", attempt: 1 }] },
      {
        task: "do step two",
        status: "passed",
        attempts: 2,
        verdicts: [
          { role: "reviewer", verdict: "needs_retry", reason: "once more", attempt: 1 },
          { role: "reviewer", verdict: "pass", attempt: 2 },
        ],
      },
      { task: "sent back", status: "pending", attempts: 1, verdicts: [{ role: "reviewer", verdict: "needs_retry", reason: "again" }] },
      { task: "under review", status: "reviewing", attempts: 1 },
      { task: "stuck", status: "blocked", attempts: 3 },
      { task: "not yet" },
    ],
  },
};

describe("a past run's checklist", () => {
  it("maps the record's roles state to the checklist the live events build", () => {
    const items = checklistOfRun(record);
    expect(items?.map((i) => i.state)).toEqual(["passed", "passed", "retried", "running", "failed", "pending"]);
    expect(items?.[0]).toEqual({
      task: "do step one",
      criteria: ["step 1 done"],
      state: "passed",
      attempt: 1,
      verdicts: [{ role: "reviewer", verdict: "pass", reason: "done", attempt: 1 }],
    });
    expect(items?.[1]?.attempt).toBe(2);
    expect(items?.[1]?.verdicts).toEqual([
      { role: "reviewer", verdict: "needs_retry", reason: "once more", attempt: 1 },
      { role: "reviewer", verdict: "pass", reason: "", attempt: 2 },
    ]);
    expect(items?.[5]).toMatchObject({ criteria: [], attempt: 0, verdicts: [] });
  });

  it("is null for a run without roles or without a plan yet", () => {
    expect(checklistOfRun({ run_id: "r", state: "completed" })).toBeNull();
    expect(checklistOfRun({ run_id: "r", state: "running", roles: { phase: "plan" } })).toBeNull();
  });
});

describe("a past session's entries", () => {
  it("keeps each query's last answer and its run, and puts the checklist on it", () => {
    const queries = pastQueries([
      { query: "one", query_id: "q1", decision: "call_tool", tool_agent_id: "echo-agent", tool_name: "echo" },
      { query: "one", query_id: "q1", decision: "final_answer", answer: "first", run_id: "run_1" },
      { decision: "summary", summary: "…" },
      { query: "two", query_id: "q2", decision: "answer_directly", answer: "second" },
    ]);
    expect(queries).toEqual([
      { question: "one", answer: "first", runId: "run_1", agentsUsed: ["echo-agent"] },
      { question: "two", answer: "second", runId: null, agentsUsed: [] },
    ]);
    let n = 0;
    const entries = pastEntries(queries, new Map([["run_1", checklistOfRun(record)!]]), () => `p${++n}`);
    expect(entries.map((e) => [e.kind, e.text])).toEqual([
      ["user", "one"],
      ["assistant", "first"],
      ["user", "two"],
      ["assistant", "second"],
    ]);
    expect(entries[1]).toMatchObject({ state: "done", checklist: expect.any(Array) });
    expect(entries[3]).not.toHaveProperty("checklist");
  });
});
