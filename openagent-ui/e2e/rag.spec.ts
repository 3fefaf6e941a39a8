import AxeBuilder from "@axe-core/playwright";
import { expect, test, type App } from "./fixtures";

const EXTRACTOR = "document-extractor-agent";
const INDEXER = "document-indexer-agent";
/** e2e/stack.py's RAG_MAX_ATTACHMENT_BYTES. */
const LIMIT = 64 * 1024;

const NOTES = [
  "# Harbour notes",
  "",
  "The harbour opens at dawn and closes at dusk.",
  "",
  "Ferries to the island leave every two hours from pier four.",
].join("\n");

async function linkRagAgents(app: App): Promise<void> {
  for (const [label, agentId] of [
    ["RAG · Extractor", EXTRACTOR],
    ["RAG · Indexer", INDEXER],
  ] as const) {
    await expect(app.sidebarRow(label)).toContainText("connected");
    await app.sidebarRow(label).getByRole("button", { name: `Add ${label} to canvas` }).click();
    await expect(app.agentNode(agentId)).toBeVisible();
    await app.page.getByRole("button", { name: "Link to orchestrator" }).click();
  }
  await expect(app.node("Orchestrator")).toContainText("2 linked agents");
}

test("attach a file: the RAG agents index it and the answer names the file", async ({ app, page }) => {
  await app.openConnected();
  await expect(page.getByText(`Attachments: up to 5 files, 64 KB each`)).toBeVisible(); // the master's limits
  await linkRagAgents(app);

  await page.getByLabel("Attach files").setInputFiles({ name: "harbour-notes.md", mimeType: "text/markdown", buffer: Buffer.from(NOTES) });
  await expect(page.getByRole("list", { name: "Files to send" })).toContainText("harbour-notes.md");
  await app.ask("When does the harbour open?");

  const answer = app.lastAnswer();
  await expect(answer.getByRole("listitem", { name: `Tool call ${INDEXER} search_knowledge` })).toContainText("When does the harbour open?");
  await expect(answer).toContainText("From harbour-notes.md (", { timeout: 60_000 });
  await expect(answer).toContainText("The harbour opens at dawn");
  await expect(answer).toContainText(new RegExp(`Used: .*${INDEXER}`));
  await expect(page.getByRole("log", { name: "Transcript" }).getByRole("listitem", { name: "Your message" }).last()).toContainText(
    "Attached: harbour-notes.md",
  );
  await expect(app.agentNode(INDEXER).locator("[data-glow]")).toHaveAttribute("data-glow", "fading");
  await expect(page.getByRole("list", { name: "Files to send" })).toHaveCount(0);

  // The session's files, from GET /query/session-rag-context, with the indexer's state.
  const files = page.getByRole("list", { name: "Files in this session:" });
  await expect(files).toContainText("harbour-notes.md");
  await expect(files).toContainText("indexed");

  // A follow-up in the same session finds the file without attaching it again.
  await app.ask("Where do the ferries to the island leave from?");
  await expect(app.lastAnswer()).toContainText("From harbour-notes.md (", { timeout: 60_000 });
  await expect(app.lastAnswer()).toContainText("pier four");

  // New session forgets them.
  await page.getByRole("button", { name: "New session" }).click();
  await expect(files).toHaveCount(0);
});

test("a file over the limit is refused before sending, naming the file", async ({ app, page }) => {
  await app.openConnected();
  const input = page.getByLabel("Attach files");
  await input.setInputFiles({ name: "big.txt", mimeType: "text/plain", buffer: Buffer.alloc(LIMIT + 4096, "x") });
  const alert = page.getByRole("alert", { name: "Attachment error" });
  await expect(alert).toHaveText("big.txt is 68 KB: the limit is 64 KB per file");
  await app.ask("Summarize it");
  // Nothing was sent: the question and the file stay.
  await expect(page.getByRole("log", { name: "Transcript" }).getByRole("listitem", { name: "Your message" })).toHaveCount(0);
  await expect(page.getByLabel("Message", { exact: true })).toHaveValue("Summarize it");
  await expect(page.getByRole("list", { name: "Files to send" })).toContainText("big.txt (68 KB)");
  const results = await new AxeBuilder({ page }).include(".chat").analyze();
  const serious = results.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  expect(serious.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)).toEqual([]);
  await page.getByRole("button", { name: "Remove big.txt" }).click();
  await expect(alert).toHaveCount(0);
  await expect(page.getByRole("list", { name: "Files to send" })).toHaveCount(0);
});

test("the master's 413 and 400 for attachments are shown naming the file, and the files are kept", async ({ app, page }) => {
  // A master that does not announce its limits (an older one): the page falls back to 2 MB,
  // so the file reaches the master, which refuses it.
  await page.route("**/query/orchestrator-models", async (route) => {
    const response = await route.fetch();
    const { attachment_limits: _limits, ...rest } = (await response.json()) as Record<string, unknown>;
    await route.fulfill({ response, json: rest });
  });
  await app.openConnected();
  await expect(page.getByText("Attachments: up to 5 files, 2 MB each")).toBeVisible();
  await linkRagAgents(app);

  await page.getByLabel("Attach files").setInputFiles({ name: "big.txt", mimeType: "text/plain", buffer: Buffer.alloc(LIMIT + 1, "x") });
  await app.ask("Summarize it");
  const alert = page.getByRole("alert", { name: "Attachment error" });
  await expect(alert).toHaveText(
    `413 · attachment 'big.txt' is ${LIMIT + 1} bytes; the limit is ${LIMIT} bytes per file (RAG_MAX_ATTACHMENT_BYTES)`,
  );
  await expect(app.lastAnswer()).toContainText("attachment 'big.txt'");
  await expect(page.getByRole("list", { name: "Files to send" })).toContainText("big.txt");
  await expect(page.getByLabel("Message", { exact: true })).toHaveValue("Summarize it");

  // Swap it for a "PDF" that is plain text: the master's 400 names it.
  await page.getByRole("button", { name: "Remove big.txt" }).click();
  await page.getByLabel("Attach files").setInputFiles({ name: "report.pdf", mimeType: "application/pdf", buffer: Buffer.from("plain words, not a PDF") });
  await page.getByRole("button", { name: "Send" }).click();
  await expect(alert).toHaveText("400 · attachment 'report.pdf': declared as application/pdf but the content is plain text");
  await expect(page.getByRole("list", { name: "Files in this session:" })).toHaveCount(0); // nothing stored
});
