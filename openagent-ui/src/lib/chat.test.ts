import { describe, expect, it } from "vitest";
import { parseSse, runEventOf } from "./sse";
import {
  applyEvent,
  attachmentFailure,
  attachmentLimitsOf,
  attachmentProblem,
  buildQuery,
  curlCommand,
  formatBytes,
  glowTargets,
  newAssistantEntry,
  parseArguments,
  sessionFiles,
} from "./chat";

const stream = [
  'event: step\ndata: {"step": 1, "tool_calls": ["demo__echo"]}\n\n',
  'event: tool_call\ndata: {"call_id": "c1", "agent_id": "demo", "tool_name": "echo", "arguments": {"text": "hi"}}\n\n',
  'event: tool_progress\ndata: {"call_id": "c1", "message": "half", "progress": 0.5, "agent_id": "demo", "tool_name": "echo"}\n\n',
  'event: tool_result\ndata: {"call_id": "c1", "agent_id": "demo", "tool_name": "echo", "success": true, "result": {"echo": "hi"}}\n\n',
  'event: token\ndata: {"text": "It "}\n\n',
  'event: token\ndata: {"text": "says hi"}\n\n',
  'event: query_result\ndata: {"query_id": "q", "session_id": "s", "success": true, "answer": "It says hi", "agents_used": [{"agent_id": "demo", "tool_name": "echo"}], "status": "completed"}\n\n',
].join("");

describe("applyEvent", () => {
  it("folds a streamed tool call and answer into one entry", () => {
    let entry = newAssistantEntry("a");
    const seen: string[] = [];
    for (const event of parseSse(stream)) {
      entry = applyEvent(entry, runEventOf(event.event, event.data)!);
      seen.push(entry.text);
    }
    expect(seen).toContain("It ");
    expect(entry.state).toBe("done");
    expect(entry.text).toBe("It says hi");
    expect(entry.steps).toEqual([
      {
        callId: "c1",
        agentId: "demo",
        toolName: "echo",
        arguments: { text: "hi" },
        state: "ok",
        progress: { message: "half", progress: 0.5 },
        result: { echo: "hi" },
      },
    ]);
    expect(entry.agentsUsed).toEqual(["demo"]);
  });

  it("records a refused call that has no call id as a failed step", () => {
    const entry = applyEvent(newAssistantEntry("a"), {
      type: "tool_result",
      call_id: null, agent_id: "demo", tool_name: "echo", success: false, error: "invalid arguments",
    });
    expect(entry.steps[0]).toMatchObject({ state: "error", error: "invalid arguments" });
  });

  it("keeps the plan of an awaiting_approval answer and the error of a failed one", () => {
    const plan = { plan_id: "p1", steps: [{ agent_id: "demo", tool_name: "echo", intent: "", arguments: {} }], summary: "" };
    const waiting = applyEvent(newAssistantEntry("a"), { type: "query_result", query_id: "q", success: true, status: "awaiting_approval", plan });
    expect(waiting).toMatchObject({ planState: "pending", plan });
    const failed = applyEvent(newAssistantEntry("a"), { type: "query_result", query_id: "q", success: false, error: "LLM down", error_code: "llm_error" });
    expect(failed).toMatchObject({ state: "error", error: "LLM down", errorCode: "llm_error" });
  });
});

// The SSE of an auto-mode run with roles (as tests/master/query/test_roles.py streams it).
const rolesStream = [
  'event: plan\ndata: {"type": "plan", "subtasks": [{"task": "do step one", "criteria": ["step 1 done"]}, {"task": "do step two", "criteria": ["step 2 done"]}]}\n\n',
  'event: subtask_started\ndata: {"type": "subtask_started", "index": 0, "task": "do step one", "attempt": 1}\n\n',
  'event: verdict\ndata: {"type": "verdict", "index": 0, "role": "reviewer", "verdict": "pass", "reason": "step 1 was done", "attempt": 1}\n\n',
  'event: subtask_started\ndata: {"type": "subtask_started", "index": 1, "task": "do step two", "attempt": 1}\n\n',
  'event: verdict\ndata: {"type": "verdict", "index": 1, "role": "reviewer", "verdict": "needs_retry", "reason": "say what step 2 returned", "attempt": 1}\n\n',
];

describe("the roles checklist", () => {
  it("follows plan, subtask_started and verdict events live", () => {
    let entry = newAssistantEntry("a");
    const states: string[][] = [];
    for (const event of parseSse(rolesStream.join(""))) {
      entry = applyEvent(entry, runEventOf(event.event, event.data)!);
      states.push((entry.checklist ?? []).map((item) => item.state));
    }
    expect(states).toEqual([
      ["pending", "pending"],
      ["running", "pending"],
      ["passed", "pending"],
      ["passed", "running"],
      ["passed", "retried"],
    ]);
    expect(entry.checklist?.[1]?.verdicts).toEqual([{ role: "reviewer", verdict: "needs_retry", reason: "say what step 2 returned", attempt: 1 }]);
    entry = applyEvent(entry, { type: "subtask_started", index: 1, task: "do step two", attempt: 2 });
    expect(entry.checklist?.[1]).toMatchObject({ state: "running", attempt: 2 });
    entry = applyEvent(entry, { type: "verdict", index: 1, role: "reviewer", verdict: "fail", reason: "no", attempt: 2 });
    expect(entry.checklist?.[1]?.state).toBe("failed");
    expect(entry.checklist?.[0]?.criteria).toEqual(["step 1 done"]);
  });

  it("ignores a sub-task it has no plan for", () => {
    const entry = applyEvent(newAssistantEntry("a"), { type: "verdict", index: 3, role: "critic", verdict: "pass", reason: "", attempt: 1 });
    expect(entry.checklist).toBeUndefined();
  });
});

describe("glowTargets", () => {
  it("glows the agents used, else the orchestrator, never on failure or pending plan", () => {
    expect(glowTargets({ success: true, agents_used: [{ agent_id: "a", tool_name: "t" }, { agent_id: "a", tool_name: "u" }] })).toEqual(["agent:a"]);
    expect(glowTargets({ success: true, agents_used: [] })).toEqual(["orchestrator"]);
    expect(glowTargets({ success: false, agents_used: [] })).toEqual([]);
    expect(glowTargets({ success: true, agents_used: [], status: "awaiting_approval" })).toEqual([]);
  });
});

describe("buildQuery", () => {
  const base = { text: "hi", sessionId: null, allowedAgentIds: ["a"], model: null, profile: "default" as const, autoMode: false, requirePlanApproval: true };
  it("scopes to linked agents, streams, and asks for plan approval only in auto mode", () => {
    expect(buildQuery(base)).toEqual({ query: "hi", allowed_agent_ids: ["a"], orchestrator_prompt_profile: "default", auto_mode: false, stream: true });
    expect(buildQuery({ ...base, autoMode: true, sessionId: "s", model: "gpt-4o" })).toMatchObject({
      auto_require_plan_approval: true, session_id: "s", orchestrator_model: "gpt-4o",
    });
  });
  it("executes an edited plan in auto mode", () => {
    const steps = [{ agent_id: "a", tool_name: "t", intent: "", arguments: { x: 1 } }];
    const body = buildQuery({ ...base, autoMode: true, sessionId: "s", execute: { planId: "p", steps } });
    expect(body.auto_plan_execute).toEqual({ plan_id: "p", steps });
    expect(body.auto_require_plan_approval).toBeUndefined();
  });
});

describe("curlCommand and parseArguments", () => {
  it("never copies the key and quotes the body for a shell", () => {
    const curl = curlCommand("http://m:8000/", { query: "it's", stream: true }, true);
    expect(curl).toContain("$OPENAGENT_API_KEY");
    expect(curl).toContain(`'{"query":"it'\\''s","stream":true}'`);
    expect(curl).toContain("'http://m:8000/query'");
  });
  it("names the step of bad arguments", () => {
    expect(parseArguments('{"a": 1}', 1)).toEqual({ a: 1 });
    expect(() => parseArguments("[1]", 2)).toThrow("step 2: arguments must be a JSON object");
    expect(() => parseArguments("{", 3)).toThrow(/step 3: arguments are not valid JSON/);
  });
});

describe("attachments", () => {
  it("names the master's attachment refusals with their status, and nothing else", () => {
    const big = "attachment 'big.txt' is 300001 bytes; the limit is 300000 bytes per file (RAG_MAX_ATTACHMENT_BYTES)";
    expect(attachmentFailure("attachment_too_large", undefined, big)).toBe(`413 · ${big}`);
    expect(attachmentFailure("invalid_attachment", undefined, "attachment 'r.pdf': declared as application/pdf")).toMatch(/^400 · attachment 'r.pdf'/);
    expect(attachmentFailure(null, 413, "413 Too large: attachment 'big.txt'")).toBe("413 Too large: attachment 'big.txt'");
    expect(attachmentFailure("llm_error", 502, "boom")).toBeNull();
    expect(attachmentFailure(null, 400, "bad query")).toBeNull();
  });

  it("reads the master's limits and checks files against them before sending", () => {
    expect(attachmentLimitsOf({ attachment_limits: { max_bytes: 1000, max_count: 2 } })).toEqual({ maxBytes: 1000, maxCount: 2 });
    expect(attachmentLimitsOf({ default_model: "x" })).toBeNull();
    expect(attachmentLimitsOf(null)).toBeNull();
    const limits = { maxBytes: 2048, maxCount: 2 };
    expect(attachmentProblem([{ name: "a.md", size: 2048 }], limits)).toBeNull();
    expect(attachmentProblem([{ name: "big.md", size: 3072 }], limits)).toBe("big.md is 3 KB: the limit is 2 KB per file");
    expect(attachmentProblem([1, 2, 3].map((i) => ({ name: `${i}.md`, size: 1 })), limits)).toMatch(/3 files attached: .* at most 2/);
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(2 * 1024 * 1024)).toBe("2 MB");
  });

  it("lists the session's files with their indexing state", () => {
    const context = {
      session_id: "s",
      attachments: [
        { ref: "att_1", filename: "notes.md", size: 120, index: { status: "indexed", chunks: 2 } },
        { ref: "att_2", filename: "bad.pdf", size: 9, index: { status: "failed", error: "the PDF is corrupt" } },
        { ref: "att_3", filename: "new.txt", size: 3, index: null },
        { filename: "no ref" },
      ],
    };
    expect(sessionFiles(context)).toEqual([
      { ref: "att_1", filename: "notes.md", size: 120, status: "indexed", chunks: 2, error: null },
      { ref: "att_2", filename: "bad.pdf", size: 9, status: "failed", chunks: null, error: "the PDF is corrupt" },
      { ref: "att_3", filename: "new.txt", size: 3, status: "not indexed yet", chunks: null, error: null },
    ]);
    expect(sessionFiles({})).toEqual([]);
  });
});
