/**
 * Screenshots for the docs (docs/ui-builder.png, docs/ui-mcp-client.png, docs/ui-approval.png,
 * docs/ui-keys.png): `npm run screenshots`. The README's canvas and the tour's chat come from a
 * master with the demo LLM instead: `npm run screenshots:demo` (scripts/demo-screens.mjs).
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect, test } from "./fixtures";

const docs = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../docs");

test("agent builder", async ({ app, page }) => {
  await app.openConnected();
  await page.getByRole("button", { name: "Agent builder" }).click();
  const builder = page.getByRole("dialog", { name: "Agent builder" });
  await builder.getByLabel("Name").fill("Unit converter");
  await builder.getByLabel("Description").fill("Converts km to miles, kg to lb and C to F");
  await builder.getByLabel("Tools (optional)").fill("convert");
  await builder.getByRole("button", { name: "Generate" }).click();
  await expect(builder.getByRole("status", { name: "Check verdict" })).toContainText("checks passed", { timeout: 60_000 });
  await page.screenshot({ path: path.join(docs, "ui-builder.png") });
});

test("connect an MCP client", async ({ app, page }) => {
  await app.openConnected();
  await page.getByRole("button", { name: "Connect an MCP client" }).click();
  const dialog = page.getByRole("dialog", { name: "Connect an MCP client" });
  await expect(dialog.getByLabel("MCP endpoint URL", { exact: true })).toBeVisible();
  await dialog.screenshot({ path: path.join(docs, "ui-mcp-client.png") });
});

test("approval card", async ({ app, page }) => {
  await app.openConnected();
  await app.dragOntoCanvas("e2e-bank");
  await app.linkByDragging("e2e-bank");
  await app.ask("Please transfer 250 to bob");
  const card = page.getByRole("region", { name: "Approval e2e-bank · transfer" });
  await card.getByRole("textbox", { name: "amount" }).fill("200");
  await expect(app.agentNode("e2e-bank").getByRole("status")).toContainText("awaits approval");
  await page.getByRole("region", { name: "Chat" }).screenshot({ path: path.join(docs, "ui-approval.png") });
});

test("API keys", async ({ app, page }) => {
  await app.openConnected();
  await page.getByRole("button", { name: "Keys", exact: true }).click();
  const dialog = page.getByRole("dialog", { name: "Access keys" });
  for (const [name, role] of [
    ["wall screen", "viewer"],
    ["ci-bot", "client"],
  ] as const) {
    await dialog.getByLabel("Name").fill(name);
    await dialog.getByLabel("Role").selectOption(role);
    await dialog.getByRole("button", { name: "Create key" }).click();
    await expect(dialog.getByRole("table", { name: "Stored keys" })).toContainText(name);
  }
  await expect(dialog.getByRole("status", { name: "New key's secret" })).toContainText("oak_");
  await page.screenshot({ path: path.join(docs, "ui-keys.png") });
});
