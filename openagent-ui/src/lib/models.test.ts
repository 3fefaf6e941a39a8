import { describe, expect, it } from "vitest";

import { DEMO_MODEL, modelLabel } from "./models";

describe("modelLabel", () => {
  it("says the demo LLM is not a model", () => {
    expect(modelLabel(DEMO_MODEL)).toBe("openagent-demo (demo LLM, not a model)");
  });
  it("leaves real model ids alone", () => {
    expect(modelLabel("gpt-4o-mini")).toBe("gpt-4o-mini");
  });
});
