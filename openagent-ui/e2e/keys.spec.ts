/** Keys and roles in the page: who you are, the key panel, and what a client key does not see. */
import { expect, test } from "./fixtures";

test("an administrator makes a client key; the client sees who it is and no admin features", async ({ app, page }) => {
  await app.openConnected();
  await expect(page.getByRole("status", { name: "Signed in as" })).toContainText("admin");
  await page.getByRole("button", { name: "Keys", exact: true }).click();
  const dialog = page.getByRole("dialog", { name: "Access keys" });
  const name = `alice-${Date.now()}`;
  await dialog.getByLabel("Name").fill(name);
  await dialog.getByLabel("Role").selectOption("client");
  await dialog.getByLabel("Tenant").fill("team-a");
  await dialog.getByRole("button", { name: "Create key" }).click();
  const secret = (await dialog.getByRole("status", { name: "New key's secret" }).locator("code").textContent()) ?? "";
  expect(secret).toMatch(/^oak_/);
  await expect(dialog.getByRole("table", { name: "Stored keys" })).toContainText(name);
  await dialog.getByRole("button", { name: "Close Access keys" }).click();
  await expect(dialog).toBeHidden();

  await page.getByRole("button", { name: "Disconnect" }).click();
  await expect(page.getByRole("status", { name: "Master status" })).toContainText("Not connected");
  await app.connect(secret);
  await expect(page.getByRole("status", { name: "Master status" })).toContainText("Connected");
  await expect(page.getByRole("status", { name: "Signed in as" })).toContainText(`${name} · client · tenant team-a`);
  const toolbar = page.getByRole("toolbar", { name: "Workspace" });
  await expect(toolbar.getByRole("button", { name: "Export YAML" })).toBeVisible();
  for (const hidden of ["Agent builder", "Restore on master", "Keys"]) {
    await expect(toolbar.getByRole("button", { name: hidden, exact: true })).toHaveCount(0);
  }

  // Revoked by the administrator: the page's next call is refused.
  await page.getByRole("button", { name: "Disconnect" }).click();
  await app.connect();
  await page.getByRole("button", { name: "Keys", exact: true }).click();
  await dialog.getByRole("button", { name: `Revoke ${name}` }).click();
  await expect(dialog.getByRole("table", { name: "Stored keys" })).not.toContainText(name);
});

test("a viewer key is offered no chat and no approvals, and nothing it does is refused", async ({ app, page, stack }) => {
  const made = await page.request.post(`${stack.master}/keys`, {
    headers: { Authorization: `Bearer ${stack.api_key}` },
    data: { name: `wall-${Date.now()}`, role: "viewer", tenant: "default", agent_ids: [] },
  });
  expect(made.status()).toBe(201);
  const { secret } = (await made.json()) as { secret: string };
  const refused: string[] = [];
  page.on("response", (response) => {
    if (response.status() === 403) refused.push(`${response.request().method()} ${response.url()}`);
  });

  await app.open();
  await app.connect(secret);
  await expect(page.getByRole("status", { name: "Signed in as" })).toContainText("viewer");
  await expect(app.sidebarRow("demo-invocation-agent")).toBeVisible(); // read-only views work
  const toolbar = page.getByRole("toolbar", { name: "Workspace" });
  await expect(toolbar.getByRole("button", { name: "Export YAML" })).toBeVisible();
  await expect(toolbar.getByRole("button", { name: /^Approvals/ })).toHaveCount(0);
  const chat = page.getByRole("region", { name: "Chat" });
  await expect(chat.getByRole("note")).toContainText("read-only");
  await expect(chat.getByLabel("Message", { exact: true })).toHaveCount(0);
  await expect(chat.getByRole("button")).toHaveCount(0);
  await expect(page.getByRole("separator", { name: "Resize chat" })).toHaveCount(0);
  // Linking a registered HTTP agent scopes the canvas only: no POST /register, which the viewer may not call.
  await app.sidebarRow("demo-invocation-agent").getByRole("button", { name: "Add demo-invocation-agent to canvas" }).click();
  await app.agentNode().click();
  await page.getByRole("button", { name: "Link to orchestrator" }).click();
  await expect(app.node("Orchestrator")).toContainText("1 linked agent");
  // The page's polls (agents, discovery) keep going; none of its calls is refused.
  await page.getByRole("button", { name: "Disconnect" }).click();
  expect(refused).toEqual([]);
});
