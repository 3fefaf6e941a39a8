import AxeBuilder from "@axe-core/playwright";
import type { Locator } from "@playwright/test";
import { expect, test } from "./fixtures";

const BANK = "e2e-bank";

/** Whether all of `target` is on screen inside the scrolling `container` (not scrolled out of it). */
async function shownIn(target: Locator, container: Locator): Promise<boolean> {
  const [t, c] = [await target.boundingBox(), await container.boundingBox()];
  return !!t && !!c && t.height > 0 && t.y >= c.y - 1 && t.y + t.height <= c.y + c.height + 1;
}

test("a query pauses on a transfer that needs approval; the user edits the amount, approves and sees the result", async ({ app, page }) => {
  // A small laptop screen: the card is taller than the transcript, its header stays in view.
  await page.setViewportSize({ width: 1366, height: 768 });
  await app.openConnected();
  await app.dragOntoCanvas(BANK);
  await app.linkByDragging(BANK);
  await expect(app.node("Orchestrator")).toContainText("1 linked agent");

  await app.ask("Please transfer 250 to bob");
  const card = page.getByRole("region", { name: `Approval ${BANK} · transfer` });
  await expect(card).toBeVisible();
  await expect(card.getByLabel("Time left")).toContainText(/23h 5\dm left/);
  const transcript = page.getByRole("log", { name: "Transcript" });
  const tool = card.locator(".approval-tool");
  await expect.poll(() => shownIn(tool, transcript)).toBe(true);
  await expect.poll(() => shownIn(card.getByLabel("Time left"), transcript)).toBe(true);
  const amount = card.getByRole("textbox", { name: "amount" });
  await expect(amount).toHaveValue("250");
  await expect(card.getByRole("textbox", { name: "to" })).toHaveValue("bob");
  await expect(card.getByRole("combobox", { name: "currency" })).toBeVisible(); // an enum of the tool's schema
  // The tool's node shows that it waits.
  await expect(app.agentNode(BANK).getByRole("status", { name: `Approval awaited by ${BANK}` })).toContainText("transfer awaits approval");
  // The approval lock is drawn (SVG), not an emoji glyph.
  const lock = app.agentNode(BANK).getByRole("img", { name: "requires approval" });
  await expect(lock).toBeVisible();
  expect(await lock.evaluate((el) => el.tagName.toLowerCase())).toBe("svg");

  const axe = await new AxeBuilder({ page }).include("[aria-label^='Approval ']").analyze();
  const serious = axe.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  expect(serious.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)).toEqual([]);

  // An edit the schema refuses (minimum 0): the master's 422, named, and the card stays open.
  await amount.fill("-5");
  await card.getByRole("button", { name: "Approve" }).click();
  await expect(card.getByRole("alert", { name: "Approval error" })).toContainText("Invalid edit");
  await expect(card.getByRole("alert", { name: "Approval error" })).toContainText("amount: -5 is less than the minimum of 0");

  await amount.fill("200");
  await card.getByRole("button", { name: "Approve" }).click();
  await expect(card.getByRole("status", { name: "Decision" })).toHaveText("Approved");
  await expect.poll(() => shownIn(card.getByRole("status", { name: "Decision" }), transcript)).toBe(true);
  const answer = app.lastAnswer();
  await expect(answer).toContainText("The agent answered");
  await expect(answer).toContainText('{"result": {"sent": 200, "to": "bob"}}');
  await expect(answer).toContainText(`Used: ${BANK}`);
  await expect(app.agentNode(BANK).getByRole("status", { name: `Approval awaited by ${BANK}` })).toHaveCount(0);
});

test("the approvals panel lists other sessions' approvals, and one decided elsewhere says so (409)", async ({ app, page, stack }) => {
  const auth = { Authorization: `Bearer ${stack.api_key}` };
  const asked = await page.request.post(`${stack.master}/query`, {
    headers: auth,
    data: { query: "Transfer 40 to carol", allowed_agent_ids: [BANK] },
  });
  const paused = (await asked.json()) as { session_id: string; approvals: { approval_id: string }[] };
  const approvalId = paused.approvals[0]!.approval_id;

  await app.openConnected();
  await page.getByRole("button", { name: /^Approvals/ }).click();
  const panel = page.getByRole("dialog", { name: "Pending approvals" });
  const card = panel.getByRole("region", { name: `Approval ${BANK} · transfer` }).filter({ hasText: paused.session_id.slice(0, 12) });
  await expect(card.getByRole("textbox", { name: "to" })).toHaveValue("carol");

  // Someone else rejects it first.
  const other = await page.request.post(`${stack.master}/approvals/${approvalId}`, {
    headers: auth,
    data: { decision: "reject", message: "carol was paid yesterday" },
  });
  expect(other.status()).toBe(200);
  await card.getByRole("button", { name: "Approve" }).click();
  await expect(card.getByRole("alert", { name: "Approval error" })).toHaveText(
    "Decided elsewhere: rejected (reason: carol was paid yesterday)",
  );
  await expect(card.getByRole("status", { name: "Decision" })).toHaveText("Rejected");
});
