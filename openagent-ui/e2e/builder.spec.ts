import AxeBuilder from "@axe-core/playwright";
import type { Page } from "@playwright/test";
import { AGENT, expect, test } from "./fixtures";

async function noSeriousViolations(page: Page, include: string): Promise<void> {
  const results = await new AxeBuilder({ page }).include(include).analyze();
  const serious = results.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  expect(serious.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)).toEqual([]);
}

test("discovery's per-file errors are shown in the sidebar", async ({ app, page }) => {
  await app.openConnected();
  const problems = page.getByRole("region", { name: "Discovery problems" });
  await expect(problems.getByRole("listitem", { name: "Discovery problem in agents/broken_agent.py" })).toContainText("line 2");
});

test("builder: generate, read the code and checks, rename, save (overwrite asks first), then drag it from discovery", async ({ app, page }) => {
  await app.openConnected();
  await page.getByRole("button", { name: "Agent builder" }).click();
  const builder = page.getByRole("dialog", { name: "Agent builder" });
  await expect(builder).toBeVisible();
  // The models come from GET /generate-agent/models, with the generator's default chosen.
  await expect(builder.getByLabel("Model")).toHaveValue(/.+/);
  await expect(builder.getByLabel("Model").locator("option", { hasText: "(default)" })).toHaveCount(1);

  await builder.getByLabel("Name").fill("Unit converter");
  await builder.getByLabel("Description").fill("Converts km to miles, kg to lb and C to F");
  await builder.getByLabel("Tools (optional)").fill("convert");
  await builder.getByRole("button", { name: "Generate" }).click();

  await expect(builder.getByRole("status", { name: "Check verdict" })).toContainText(/All \d+ checks passed/, { timeout: 60_000 });
  await expect(builder.getByRole("status", { name: "Check verdict" })).toContainText("agent id unit-converter");
  const checks = builder.getByRole("list", { name: "Checks" });
  await expect(checks.getByRole("listitem", { name: "smoke_import passed" })).toBeVisible();
  await expect(checks.getByRole("listitem", { name: /failed$/ })).toHaveCount(0);
  await expect(builder.getByRole("region", { name: "Generated code" })).toContainText('AGENT_ID = "unit-converter"');
  await noSeriousViolations(page, "dialog");

  const moduleName = builder.getByLabel("Module name");
  await expect(moduleName).toHaveValue("unit_converter");
  await moduleName.fill("e2e-converter");
  await expect(builder.getByRole("button", { name: "Save" })).toBeDisabled();
  await moduleName.fill("e2e_converter");
  await builder.getByRole("button", { name: "Save" }).click();
  const saved = builder.getByRole("status", { name: "Saved agent" });
  await expect(saved).toContainText("agents/e2e_converter.py");
  await expect(saved).toContainText("unit-converter is listed in the sidebar");

  // Saving again asks before replacing the file; confirming overwrites it.
  await builder.getByRole("button", { name: "Save" }).click();
  const confirm = builder.getByRole("group", { name: "Overwrite the existing module?" });
  await expect(confirm).toContainText("agents/e2e_converter.py exists");
  await expect(saved).toHaveCount(0);
  await confirm.getByRole("button", { name: "Overwrite agents/e2e_converter.py" }).click();
  await expect(saved).toContainText("agents/e2e_converter.py");
  await expect(confirm).toHaveCount(0);

  await builder.getByRole("button", { name: "Close Agent builder" }).click();
  await expect(builder).toBeHidden();
  const row = app.sidebarRow("unit-converter");
  await expect(row).toContainText("discovered");
  await expect(row).toContainText("convert");
  await app.dragOntoCanvas("unit-converter");
  await page.getByRole("button", { name: "Link to orchestrator" }).click();
  await expect(page.getByText("python -m agents.e2e_converter")).toBeVisible();
});

test("builder: a 422 shows the failed checks and the code; a 502 shows the LLM's failure", async ({ app, page }) => {
  await app.openConnected();
  await page.getByRole("button", { name: "Agent builder" }).click();
  const builder = page.getByRole("dialog", { name: "Agent builder" });
  await builder.getByLabel("Name").fill("Shell runner");
  await builder.getByLabel("Description").fill("A broken agent that shells out");
  await builder.getByRole("button", { name: "Generate" }).click();
  const error = builder.getByRole("alert", { name: "Builder error" });
  await expect(error).toContainText("422", { timeout: 60_000 });
  await expect(error).toContainText("still fails");
  await expect(builder.getByRole("status", { name: "Check verdict" })).toContainText(/\d+ of \d+ checks failed/);
  await expect(builder.getByRole("list", { name: "Checks" }).getByRole("listitem", { name: "imports failed" })).toContainText("subprocess");
  await expect(builder.getByRole("region", { name: "Generated code" })).toContainText("import subprocess");
  await expect(builder.getByRole("button", { name: "Save anyway" })).toBeVisible();

  await builder.getByLabel("Description").fill("Anything, during a provider outage");
  await builder.getByRole("button", { name: "Generate" }).click();
  await expect(error).toContainText("502", { timeout: 60_000 });
  await expect(builder.getByRole("region", { name: "Generated code" })).toHaveCount(0);
});

test("Restore on master shows each agent's outcome", async ({ app, page, stack }) => {
  const auth = { Authorization: `Bearer ${stack.api_key}` };
  const live = (await (await page.request.get(`${stack.master}/agents`, { headers: auth })).json()) as {
    agents: { agent_id: string; invocation_base_url?: string; tools?: unknown[] }[];
  };
  const demo = live.agents.find((a) => a.agent_id === AGENT)!;
  const unreachable = "http://127.0.0.1:9"; // the discard port: nothing listens
  const workspace = {
    version: 1,
    master: { base_url: stack.master, ws_url: stack.master.replace(/^http/, "ws") + "/ws" },
    agents: [
      {
        agent_id: "bad-schema-agent",
        transport: "invocation",
        invocation_base_url: unreachable,
        tools: [{ name: "run", description: "Bad schema", parameters: { type: "object", properties: { x: { type: "nosuchtype" } } } }],
      },
      { agent_id: AGENT, transport: "invocation", invocation_base_url: demo.invocation_base_url, tools: demo.tools },
      { agent_id: "document-indexer-agent", transport: "websocket", handler: "system_agents.document_indexer_agent", tools: [] },
      {
        agent_id: "ghost-agent",
        transport: "invocation",
        invocation_base_url: unreachable,
        tools: [{ name: "ping", description: "Ping", parameters: { type: "object", properties: {} } }],
      },
    ],
    links: [{ source: AGENT, target: "orchestrator" }],
    layout: { nodes: {} },
  };
  await app.openConnected();
  await page.getByLabel("Import YAML").setInputFiles({
    name: "workspace.yaml",
    mimeType: "application/yaml",
    buffer: Buffer.from(JSON.stringify(workspace, null, 2)),
  });
  await expect(app.agentNode("ghost-agent")).toBeVisible();

  try {
    await page.getByRole("button", { name: "Restore on master" }).click();
    const dialog = page.getByRole("dialog", { name: "Restore on master" });
    await expect(dialog.getByRole("status", { name: "Restore summary" })).toHaveText(
      "1 registered · 1 unreachable · 1 invalid · 1 skipped",
      { timeout: 60_000 },
    );
    const table = dialog.getByRole("table", { name: "Restore outcome per agent" });
    await expect(table.getByRole("row", { name: `${AGENT} registered` })).toBeVisible();
    await expect(table.getByRole("row", { name: "ghost-agent unreachable" })).toContainText("/health failed");
    await expect(table.getByRole("row", { name: "bad-schema-agent invalid" })).toContainText("invalid parameters schema");
    await expect(table.getByRole("row", { name: "document-indexer-agent skipped" })).toContainText("WebSocket agents connect themselves");
    await noSeriousViolations(page, "dialog");
    await dialog.getByRole("button", { name: "Close", exact: true }).click();
    // The unreachable agent is stored on the master and listed DOWN.
    await expect(app.sidebarRow("ghost-agent")).toContainText("DOWN");
  } finally {
    for (const agentId of ["ghost-agent", "bad-schema-agent"]) {
      await page.request.post(`${stack.master}/unregister`, { headers: auth, data: { agent_id: agentId } });
    }
  }
});
