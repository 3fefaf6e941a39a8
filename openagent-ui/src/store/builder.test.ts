import { describe, expect, it } from "vitest";
import { SOURCE, connected, describeAgent, json } from "./fakes";

describe("store: agent builder", () => {
  it("loads the generator's models, generates with the chosen one and shows the code and checks", async () => {
    const { master, store } = await connected();
    await store.getState().openBuilder();
    expect(store.getState().builder.models?.allowed_models).toEqual(["m1", "m2"]);
    expect(store.getState().builder.form.model).toBe("m1");
    describeAgent(store);
    store.getState().setBuilderForm({ model: "m2", requiresCollaboration: true });
    await store.getState().generateAgent();
    expect(master.calls.find((c) => c.path === "/generate-agent")?.body).toEqual({
      name: "Unit converter",
      description: "Converts km to miles",
      agent_type: "action",
      transport: "websocket",
      requires_collaboration: true,
      model: "m2",
      tools: ["convert"],
    });
    const b = store.getState().builder;
    expect(b.generated).toMatchObject({ source: SOURCE, passed: true, attempts: 2, agentId: "unit-converter" });
    expect(b.generated?.checks.map((c) => c.name)).toEqual(["module_name", "parses", "smoke_import"]);
    expect(b.module).toBe("unit_converter");
    expect(b.error).toBeNull();
  });

  it("refuses an empty description without calling the master", async () => {
    const { master, store } = await connected();
    store.getState().setBuilderForm({ name: "x" });
    await store.getState().generateAgent();
    expect(store.getState().builder.error?.message).toBe("Describe what the agent should do");
    expect(master.calls.some((c) => c.path === "/generate-agent")).toBe(false);
  });

  it("a 422 shows the failed checks and the code, with the master's message", async () => {
    const failed = {
      detail: {
        code: "checks_failed",
        message: "the generated code still fails restricted_calls after 2 attempts",
        module: "unit_converter",
        source: "import subprocess\n",
        checks: [
          { name: "parses", passed: true, detail: "" },
          { name: "restricted_calls", passed: false, detail: "line 1: 'subprocess' is not allowed" },
        ],
      },
    };
    const { store } = await connected([(c) => (c.path === "/generate-agent" ? json(failed, 422) : undefined)]);
    describeAgent(store);
    await store.getState().generateAgent();
    const b = store.getState().builder;
    expect(b.error).toEqual({ status: 422, message: "422 Invalid request: the generated code still fails restricted_calls after 2 attempts" });
    expect(b.generated).toMatchObject({ source: "import subprocess\n", passed: false, module: "unit_converter" });
    expect(b.generated?.checks.filter((c) => !c.passed)).toEqual([
      { name: "restricted_calls", passed: false, detail: "line 1: 'subprocess' is not allowed" },
    ]);
  });

  it("a 502 from the LLM and a 403 with the generator off are shown in the panel", async () => {
    const llmDown = { detail: { code: "llm_error", message: "the LLM failed: 500 scripted outage" } };
    const { store } = await connected([(c) => (c.path === "/generate-agent" ? json(llmDown, 502) : undefined)]);
    describeAgent(store);
    await store.getState().generateAgent();
    expect(store.getState().builder.error).toEqual({ status: 502, message: "502 Bad gateway: the LLM provider failed: the LLM failed: 500 scripted outage" });
    expect(store.getState().builder.generated).toBeNull();

    const off = { detail: "GET /generate-agent/models needs the role 'admin'; key 'ops' has the role 'viewer'" };
    const other = await connected([(c) => (c.path.startsWith("/generate-agent") ? json(off, 403) : undefined)]);
    await other.store.getState().openBuilder();
    expect(other.store.getState().builder.unavailable).toBe(
      "403 Forbidden: the master refused it: GET /generate-agent/models needs the role 'admin'; key 'ops' has the role 'viewer'",
    );
  });

  it("saves under the edited module name, then the agent is in discovery, ready to drag", async () => {
    const { master, store } = await connected();
    describeAgent(store);
    await store.getState().generateAgent();
    store.getState().setBuilderModule("my_converter");
    await store.getState().saveAgent();
    expect(master.calls.find((c) => c.path === "/save-agent")?.body).toEqual({ module: "my_converter", source: SOURCE, overwrite: false });
    expect(store.getState().builder.saved).toEqual({ module: "my_converter", file: "agents/my_converter.py", handler: "agents.my_converter", agentId: "unit-converter" });
    const entry = store.getState().catalogById["unit-converter"];
    expect(entry).toMatchObject({ source: "discover", handler: "agents.my_converter", status: "offline" });
    expect(store.getState().notices.at(-1)?.text).toBe("Saved agents/my_converter.py: unit-converter is listed in the sidebar, ready to drag");
  });

  it("asks before overwriting an existing module, and overwrites when confirmed", async () => {
    const { master, store } = await connected();
    describeAgent(store);
    await store.getState().generateAgent();
    store.getState().setBuilderModule("bad name");
    await store.getState().saveAgent();
    expect(store.getState().builder.error?.message).toMatch(/^Module name: letters, digits/);
    store.getState().setBuilderModule("taken");
    await store.getState().saveAgent();
    expect(store.getState().builder.confirmOverwrite).toBe("400 Bad request: agents/taken.py exists; send overwrite: true to replace it");
    expect(store.getState().builder.saved).toBeNull();
    await store.getState().saveAgent(true);
    expect(store.getState().builder.confirmOverwrite).toBeNull();
    expect(store.getState().builder.saved?.file).toBe("agents/taken.py");
    expect(master.calls.filter((c) => c.path === "/save-agent").map((c) => c.body?.overwrite)).toEqual([false, true]);
  });
});
