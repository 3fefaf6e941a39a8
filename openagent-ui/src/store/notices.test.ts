import { describe, expect, it } from "vitest";
import { base } from "./fakes";
import { createAppStore } from "./store";

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
