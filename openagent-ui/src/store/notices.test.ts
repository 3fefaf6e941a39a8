import { describe, expect, it } from "vitest";
import { base, timers } from "./fakes";
import { NOTICE_TIMEOUT_MS, createAppStore } from "./store";

describe("store: notices", () => {
  it("keeps the last five notices, newest last, and dismisses one by its id", () => {
    const store = createAppStore(base);
    for (let i = 1; i <= 7; i++) store.getState().notify("warning", `warning ${i}`);
    expect(store.getState().notices.map((n) => n.text)).toEqual(["warning 3", "warning 4", "warning 5", "warning 6", "warning 7"]);
    const third = store.getState().notices[2]!;
    store.getState().dismiss(third.id);
    expect(store.getState().notices.map((n) => n.text)).toEqual(["warning 3", "warning 4", "warning 6", "warning 7"]);
  });

  it("offers a retry only when asked to", () => {
    const store = createAppStore(base);
    store.getState().notify("error", "the master stopped answering", true);
    store.getState().notify("error", "the query failed");
    expect(store.getState().notices.map((n) => n.retry ?? false)).toEqual([true, false]);
  });
});

describe("store: notices go away", () => {
  it("info and warnings are dismissed after their timeout; errors stay until dismissed", () => {
    const t = timers();
    const store = createAppStore({ ...base, setTimer: t.setTimer, clearTimer: t.clearTimer });
    store.getState().notify("info", "Exported workspace.yaml");
    store.getState().notify("warning", "could not list the files");
    store.getState().notify("error", "the query failed");
    store.getState().notify("error", "the master stopped answering", true);
    t.fire(NOTICE_TIMEOUT_MS.info!);
    expect(store.getState().notices.map((n) => n.text)).toEqual(["could not list the files", "the query failed", "the master stopped answering"]);
    t.fire(NOTICE_TIMEOUT_MS.warning!);
    expect(store.getState().notices.map((n) => n.text)).toEqual(["the query failed", "the master stopped answering"]);
    expect(NOTICE_TIMEOUT_MS.error).toBeNull();
    expect(t.pending.filter((p) => !p.done)).toEqual([]);
  });
});
