import AxeBuilder from "@axe-core/playwright";
import { AGENT, expect, test } from "./fixtures";


test("connect shows the master's health and lists the agents with the RAG rows", async ({ app, page }) => {
  await app.openConnected();
  await expect(page.getByRole("status", { name: "Master status" })).toContainText("health ok");
  await expect(app.sidebarRow(AGENT)).toContainText("UP");
  await expect(app.sidebarRow("RAG · Extractor")).toBeVisible();
  await expect(app.sidebarRow("RAG · Indexer")).toBeVisible();
  await expect(app.node("Orchestrator")).toBeVisible();
  await expect(app.node("Query Client")).toContainText("online");
  // Sidebar search.
  await page.getByLabel("Search agents").fill("indexer");
  await expect(app.sidebarRow("RAG · Indexer")).toBeVisible();
  await expect(app.sidebarRow(AGENT)).toHaveCount(0);
});

test("a wrong API key shows the master's 401", async ({ app, page }) => {
  await app.open();
  await app.connect("not-the-key");
  await expect(page.getByRole("alert").filter({ hasText: "401" })).toContainText("missing or invalid API key");
});

test("drag and link an agent; a question calls its tool, streams the answer and glows the agent", async ({ app, page }) => {
  await app.openConnected();
  await app.dragOntoCanvas();
  await app.linkByDragging();
  await expect(app.node("Orchestrator")).toContainText("1 linked agent");
  await expect(page.getByRole("status").filter({ hasText: "Registered with the master" })).toBeVisible();

  await app.ask("Please echo hello");
  const answer = app.lastAnswer();
  await expect(answer.getByRole("listitem", { name: `Tool call ${AGENT} echo` })).toContainText('"hello"');
  await expect(answer).toContainText('The agent answered: {"result": {"echo": "hello"}}');
  await expect(app.agentNode().locator("[data-glow]")).toHaveAttribute("data-glow", "fading");
  await expect(app.node("Orchestrator").locator("[data-glow]")).toHaveCount(0);
  // The glow fades out.
  await expect(app.agentNode().locator("[data-glow]")).toHaveCount(0, { timeout: 15_000 });

  // Per-node logs: the last call with its arguments and result.
  await app.agentNode().click();
  await expect(page.getByRole("list", { name: `Last calls of ${AGENT}` })).toContainText('{"echo":"hello"}');

  // Copy as curl of the last query, without the key.
  await page.getByRole("button", { name: "Copy as curl" }).click();
  const curl = page.getByLabel("Last query as curl");
  await expect(curl).toHaveValue(/allowed_agent_ids":\["demo-invocation-agent"\]/);
  await expect(curl).not.toHaveValue(new RegExp(app.stack.api_key));
});

test("a direct answer glows the orchestrator", async ({ app, page }) => {
  await app.openConnected();
  await app.ask("What is two plus two?");
  await expect(app.lastAnswer()).toContainText("Direct answer: What is two plus two?");
  await expect(app.lastAnswer()).toContainText("Answered directly by the orchestrator");
  await expect(app.node("Orchestrator").locator("[data-glow]")).toHaveAttribute("data-glow", "fading");
  await expect(page.getByLabel("Session")).toContainText("Session ");
});

test("plan approval: edit a step, then execute it", async ({ app, page }) => {
  await app.openConnected();
  await app.sidebarRow(AGENT).getByRole("button", { name: `Add ${AGENT} to canvas` }).click();
  await page.getByRole("button", { name: "Link to orchestrator" }).click();
  await page.getByLabel("Auto mode").check();
  await page.getByLabel("Require plan approval").check();
  await app.ask("Plan something");
  const plan = page.getByRole("group", { name: /^Plan / });
  await expect(plan).toContainText("Echo the word");
  await expect(plan.getByLabel("Step 1 tool")).toHaveValue("echo");
  await plan.getByLabel("Step 1 arguments (JSON)").fill('{"text": "edited"}');
  await plan.getByRole("button", { name: "Execute plan" }).click();
  await expect(app.lastAnswer()).toContainText('The agent answered: {"result": {"echo": "edited"}}');
  await expect(plan).toContainText("(executed)");
  await expect(app.agentNode().locator("[data-glow]")).toHaveAttribute("data-glow", "fading");
});

test("New session clears the transcript and deletes the server-side session", async ({ app, page, stack }) => {
  await app.openConnected();
  await app.ask("First question");
  await expect(app.lastAnswer()).toContainText("Direct answer: First question");
  const label = await page.getByLabel("Session").textContent();
  const sessionPrefix = label!.replace("Session ", "").trim();
  const turns = await page.request.get(`${stack.master}/agents`, { headers: { Authorization: `Bearer ${stack.api_key}` } });
  expect(turns.ok()).toBe(true);

  // A follow-up shares the session.
  await app.ask("Second question");
  await expect(app.lastAnswer()).toContainText("Direct answer: Second question");
  await expect(page.getByLabel("Session")).toContainText(sessionPrefix);

  const deleted = page.waitForResponse((r) => r.request().method() === "DELETE" && r.url().includes("/sessions/"));
  await page.getByRole("button", { name: "New session" }).click();
  const response = await deleted;
  expect(response.status()).toBe(200);
  await expect(page.getByRole("log", { name: "Transcript" }).getByRole("listitem")).toHaveCount(0);
  await expect(page.getByLabel("Session")).toHaveText("No session yet");
  const sessionId = new URL(response.url()).pathname.split("/").pop()!;
  const gone = await page.request.get(`${stack.master}/sessions/${sessionId}`, {
    headers: { Authorization: `Bearer ${stack.api_key}` },
  });
  expect(gone.status()).toBe(404);
});

test("export then import gives the same canvas", async ({ app, page }) => {
  await app.openConnected();
  await app.dragOntoCanvas();
  await app.sidebarRow("RAG · Indexer").getByRole("button", { name: "Add RAG · Indexer to canvas" }).click();
  await page.getByRole("button", { name: "Link to orchestrator" }).click();
  // The RAG stack runs in the e2e stack, so the indexer is connected: linking just links it.
  await expect(app.node("Orchestrator")).toContainText("1 linked agent");

  const download = page.waitForEvent("download");
  await page.getByRole("button", { name: "Export YAML" }).click();
  const file = await (await download).path();
  const { readFileSync } = await import("node:fs");
  const exported = readFileSync(file!, "utf8");
  expect(exported).toContain("version: 2");
  expect(exported).toContain("handler: system_agents.document_indexer_agent");
  expect(exported).not.toContain(app.stack.api_key);
  expect(exported).not.toContain("query-client");

  // A fresh page, then import: the same nodes and links, and the same export.
  await page.reload();
  await expect(app.agentNode()).toHaveCount(0);
  await page.getByLabel("Import YAML").setInputFiles({ name: "workspace.yaml", mimeType: "application/yaml", buffer: Buffer.from(exported) });
  await expect(app.agentNode()).toBeVisible();
  await expect(app.agentNode("document-indexer-agent")).toBeVisible();
  await expect(app.node("Orchestrator")).toContainText("1 linked agent");
  const again = page.waitForEvent("download");
  await page.getByRole("button", { name: "Export YAML" }).click();
  expect(readFileSync((await (await again).path())!, "utf8")).toBe(exported);
});

test("undo and redo canvas edits, delete with the keyboard", async ({ app, page }) => {
  await app.openConnected();
  await app.sidebarRow(AGENT).getByRole("button", { name: `Add ${AGENT} to canvas` }).click();
  await expect(app.agentNode()).toBeVisible();
  await page.getByRole("button", { name: "Link to orchestrator" }).click();
  await expect(app.node("Orchestrator")).toContainText("1 linked agent");

  // Keyboard delete of the selected node.
  await app.agentNode().click();
  await page.keyboard.press("Delete");
  await expect(app.agentNode()).toHaveCount(0);
  await expect(app.node("Orchestrator")).toContainText("0 linked agents");

  await page.keyboard.press("Control+z");
  await expect(app.agentNode()).toBeVisible();
  await expect(app.node("Orchestrator")).toContainText("1 linked agent");
  await page.keyboard.press("Control+z");
  await expect(app.node("Orchestrator")).toContainText("0 linked agents");
  await page.keyboard.press("Control+Shift+z");
  await expect(app.node("Orchestrator")).toContainText("1 linked agent");
  await page.getByRole("button", { name: "Redo" }).click();
  await expect(app.agentNode()).toHaveCount(0);
  await page.getByRole("button", { name: "Undo" }).click();
  await expect(app.agentNode()).toBeVisible();
});

test("the page has no serious accessibility violations", async ({ app, page }) => {
  await app.openConnected();
  await app.ask("Hello");
  await expect(app.lastAnswer()).toContainText("Direct answer");
  const results = await new AxeBuilder({ page }).analyze();
  const serious = results.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  expect(serious.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)).toEqual([]);
});

test("Connect an MCP client shows the master's /mcp URL and each client's snippet, never the key", async ({ app, page }) => {
  await app.openConnected();
  await expect(app.sidebarRow(AGENT)).toContainText("HTTP");
  await page.getByRole("button", { name: "Connect an MCP client" }).click();
  const dialog = page.getByRole("dialog", { name: "Connect an MCP client" });
  await expect(dialog.getByLabel("MCP endpoint URL", { exact: true })).toHaveText(`${app.stack.master}/mcp`);
  for (const client of ["Claude Desktop", "Cursor", "VS Code"]) {
    await expect(dialog.getByLabel(`${client} JSON`, { exact: true })).toContainText("/mcp");
    await expect(dialog.getByLabel(`${client} JSON`, { exact: true })).not.toContainText(app.stack.api_key);
  }
});

test("auto mode with roles: the plan's sub-tasks as a checklist, with verdicts and a retry", async ({ app, page }, info) => {
  await app.openConnected();
  await app.sidebarRow(AGENT).getByRole("button", { name: `Add ${AGENT} to canvas` }).click();
  await page.getByRole("button", { name: "Link to orchestrator" }).click();
  await page.getByLabel("Prompt profile").selectOption("roles");
  await page.getByLabel("Auto mode").check();
  await app.ask("Echo two words, with roles");
  const checklist = app.lastAnswer().getByRole("list", { name: "Plan checklist" });
  await expect(checklist.getByRole("listitem", { name: "Sub-task 1: passed" })).toContainText("echo hello");
  const second = checklist.getByRole("listitem", { name: "Sub-task 2: passed" });
  await expect(second).toContainText("attempt 2");
  const verdicts = second.getByRole("list", { name: "Verdicts on sub-task 2" });
  await expect(verdicts.getByRole("listitem")).toHaveText([
    "reviewer · needs retry: echo it once more to be sure",
    "reviewer · pass (attempt 2): the agent echoed it",
  ]);
  await expect(app.lastAnswer()).toContainText("world-again");
  const results = await new AxeBuilder({ page }).include('[aria-label="Plan checklist"]').analyze();
  const serious = results.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  expect(serious.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)).toEqual([]);
  await checklist.screenshot({ path: info.outputPath("roles-checklist.png") });
  await page.screenshot({ path: info.outputPath("roles-chat.png") });

  // After a reload the session's answer comes back, with its checklist read from the run's record.
  await page.reload();
  await expect(app.lastAnswer()).toContainText("world-again");
  await expect(app.lastAnswer()).toContainText(`Used: ${AGENT}`);
  const again = app.lastAnswer().getByRole("list", { name: "Plan checklist" });
  await expect(again.getByRole("listitem", { name: "Sub-task 1: passed" })).toContainText("echo hello");
  const secondAgain = again.getByRole("listitem", { name: "Sub-task 2: passed" });
  await expect(secondAgain).toContainText("attempt 2");
  await expect(secondAgain.getByRole("list", { name: "Verdicts on sub-task 2" }).getByRole("listitem")).toHaveText([
    "reviewer · needs retry: echo it once more to be sure",
    "reviewer · pass (attempt 2): the agent echoed it",
  ]);
  await page.screenshot({ path: info.outputPath("roles-chat-reloaded.png") });
});
