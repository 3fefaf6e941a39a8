import { describe, expect, it } from "vitest";
import { base, timers } from "./fakes";
import { CALL_LOG_LIMIT, GLOW_FADE_MS, createAppStore } from "./store";

describe("store: activity", () => {
  it("a node glows while active and its fade-out is cancelled when it lights again", () => {
    const t = timers();
    const store = createAppStore({ ...base, setTimer: t.setTimer, clearTimer: t.clearTimer });
    store.getState().glowNode("agent:a", "fading");
    store.getState().glowNode("agent:a", "active");
    t.fire(GLOW_FADE_MS);
    expect(store.getState().glow["agent:a"]?.phase).toBe("active");
    store.getState().glowNode("agent:a", "fading");
    t.fire(GLOW_FADE_MS);
    expect(store.getState().glow["agent:a"]).toBeUndefined();
  });

  it("pairs a result with its call, records failures, and keeps the last calls only", () => {
    const store = createAppStore({ ...base, now: () => 7 });
    const { logCall } = store.getState();
    logCall("a", { type: "tool_call", call_id: "c1", tool_name: "echo", arguments: { text: "x" } });
    logCall("a", { type: "tool_call", call_id: "c2", tool_name: "fail", arguments: {} });
    logCall("a", { type: "tool_result", call_id: "c1", tool_name: "echo", success: true, result: { echo: "x" } });
    logCall("a", { type: "tool_result", call_id: "c2", tool_name: "fail", success: false, error: "boom" });
    expect(store.getState().callLogs.a).toEqual([
      { callId: "c1", toolName: "echo", arguments: { text: "x" }, state: "ok", result: { echo: "x" }, at: 7 },
      { callId: "c2", toolName: "fail", arguments: {}, state: "error", error: "boom", at: 7 },
    ]);
    for (let i = 0; i < CALL_LOG_LIMIT + 5; i++) logCall("b", { type: "tool_call", call_id: `c${i}`, tool_name: "t" });
    expect(store.getState().callLogs.b).toHaveLength(CALL_LOG_LIMIT);
    expect(store.getState().callLogs.b?.[0]?.callId).toBe("c5");
  });
});
