import { expect, test } from "./fixtures";

const GREETER = "e2e-greeter";

test("Start in master runs a discovered WebSocket agent, which then answers a question", async ({ app, page }) => {
  await app.openConnected();
  const row = app.sidebarRow(GREETER);
  await expect(row).toContainText("discovered");
  await row.getByRole("button", { name: `Add ${GREETER} to canvas` }).click();
  await page.getByRole("button", { name: "Link to orchestrator" }).click();
  await expect(page.getByText("python -m agents.e2e_greeter")).toBeVisible();

  await page.getByRole("button", { name: "Start in master" }).click();
  await expect(page.getByRole("status").filter({ hasText: "Started in the master (agents.e2e_greeter)" })).toBeVisible();
  await expect(row).toContainText("connected");
  await expect(app.agentNode(GREETER)).toContainText("connected");

  await app.ask("Please greet Ada");
  await expect(app.lastAnswer().getByRole("listitem", { name: `Tool call ${GREETER} greet` })).toContainText('"Ada"');
  await expect(app.lastAnswer()).toContainText("Hello, Ada!");
});
