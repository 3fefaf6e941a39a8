import { describe, expect, it } from "vitest";
import {
  EMPTY_FORM,
  discoveryProblems,
  formProblem,
  generateBody,
  generatedFrom,
  generationFailure,
  moduleNameProblem,
  restoreSummary,
  toolNames,
} from "./builder";

describe("builder: module names (as openagent/agent_modules.py: is_module_name)", () => {
  it("accepts identifiers and refuses paths, keywords, dunders and digits first", () => {
    expect(moduleNameProblem("unit_converter")).toBeNull();
    expect(moduleNameProblem("_private2")).toBeNull();
    for (const bad of ["", "../x", "agents.x", "1abc", "with space", "a-b", "x".repeat(101)]) {
      expect(moduleNameProblem(bad), bad).not.toBeNull();
    }
    expect(moduleNameProblem("class")).toBe("class is a Python keyword");
    expect(moduleNameProblem("__init__")).toBe("a module name cannot start with __");
  });
});

describe("builder: the form", () => {
  const form = { ...EMPTY_FORM, name: " Unit converter ", description: "Converts", tools: "convert, list_units convert" };

  it("builds POST /generate-agent's body, leaving the model to the master when none is chosen", () => {
    expect(toolNames(form.tools)).toEqual(["convert", "list_units"]);
    expect(generateBody(form)).toEqual({
      name: "Unit converter",
      description: "Converts",
      agent_type: "action",
      transport: "websocket",
      requires_collaboration: false,
      tools: ["convert", "list_units"],
    });
    expect(generateBody({ ...form, tools: "", model: "m2" })).not.toHaveProperty("tools");
    expect(generateBody({ ...form, model: "m2" }).model).toBe("m2");
  });

  it("says what is missing or refused before sending", () => {
    expect(formProblem(EMPTY_FORM)).toBe("Give the agent a name");
    expect(formProblem({ ...form, description: " " })).toBe("Describe what the agent should do");
    expect(formProblem({ ...form, transport: "invocation", requiresCollaboration: true })).toMatch(/WebSocket transport/);
    expect(formProblem({ ...form, tools: "ok bad/name" })).toMatch(/"bad\/name"/);
    expect(formProblem(form)).toBeNull();
  });
});

describe("builder: answers", () => {
  it("reads a 200 and a 422 with the code and failed checks", () => {
    const ok = generatedFrom({
      module: "m",
      agent_id: "a",
      source: "x = 1\n",
      transport: "websocket",
      tools: [{ name: "t" }],
      checks: [{ name: "parses", passed: true, detail: "" }],
      model: "gpt",
      attempts: 1,
    });
    expect(ok).toMatchObject({ module: "m", agentId: "a", passed: true, attempts: 1 });
    const failed = generationFailure({
      detail: { code: "checks_failed", message: "still fails", module: "m", source: "import os\n", checks: [{ name: "imports", passed: false, detail: "os" }] },
    });
    expect(failed?.problem).toEqual({ code: "checks_failed", message: "still fails" });
    expect(failed?.generated).toMatchObject({ module: "m", source: "import os\n", passed: false, checks: [{ name: "imports", passed: false, detail: "os" }] });
  });

  it("a 422 without code (prose twice, FastAPI validation) carries no generated code", () => {
    expect(generationFailure({ detail: { code: "no_code", message: "prose", source: "", checks: [] } })?.generated).toBeNull();
    expect(generationFailure({ detail: [{ loc: ["body", "name"], msg: "too short" }] })).toBeNull();
    expect(generationFailure("text")).toBeNull();
  });

  it("keeps discovery's well-formed per-file errors", () => {
    expect(
      discoveryProblems([{ file: "agents/x.py", error: "syntax", agent_id: "x" }, { error: "no file" }, null, { file: "agents/y.py" }]),
    ).toEqual([
      { file: "agents/x.py", error: "syntax", agent_id: "x" },
      { file: "agents/y.py", error: "cannot be analysed" },
    ]);
    expect(discoveryProblems(undefined)).toEqual([]);
  });

  it("summarises a restore in a fixed order", () => {
    expect(restoreSummary([])).toBe("The workspace has no agents to restore");
    expect(
      restoreSummary([
        { agent_id: "c", status: "invalid", reason: "r" },
        { agent_id: "w", status: "skipped" },
        { agent_id: "a", status: "registered" },
        { agent_id: "b", status: "registered" },
      ]),
    ).toBe("2 registered · 1 invalid · 1 skipped");
  });
});
