/**
 * The README's and the UI tour's screenshots (docs/ui-canvas.png, docs/ui-chat.png) at 1440x900,
 * taken from the real UI of a master that ./scripts/run.sh started with the demo LLM:
 *
 *     OPENAGENT_URL=http://127.0.0.1:8000 OPENAGENT_API_KEY=... node openagent-ui/scripts/demo-screens.mjs [OUT_DIR]
 *
 * OUT_DIR defaults to docs/. Uses Debian's Chromium (CHROMIUM_PATH, default /usr/bin/chromium).
 */
import { chromium } from "@playwright/test";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(process.argv[2] ?? path.join(here, "../../docs"));
const master = process.env.OPENAGENT_URL ?? "http://127.0.0.1:8000";
const key = process.env.OPENAGENT_API_KEY ?? "";

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  page.setDefaultTimeout(60_000);
  await page.goto(`${master}/ui/`);
  await page.getByLabel("Master URL").fill(master);
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Connect", exact: true }).click();
  await page.getByRole("status", { name: "Master status" }).getByText("Connected").waitFor();

  // The calculator linked to the orchestrator, the weather agent and the RAG agents beside it.
  for (const label of ["calculator-agent", "weather-agent", "RAG · Extractor", "RAG · Indexer"]) {
    await page.getByRole("button", { name: `Add ${label} to canvas` }).click();
  }
  const target = page.getByRole("group", { name: "Orchestrator", exact: true });
  await page.getByRole("group", { name: "Agent calculator-agent", exact: true }).click();
  await page.getByRole("button", { name: "Link to orchestrator" }).click();
  await target.getByText("1 linked agent").waitFor();
  await page.getByRole("button", { name: "Fit view" }).click();

  const answers = page.getByRole("log", { name: "Transcript" }).getByRole("listitem", { name: "Orchestrator answer" });
  for (const [i, question] of ["Please add 17 and 25", "Now multiply 6 by 7"].entries()) {
    await page.getByLabel("Message", { exact: true }).fill(question);
    await page.getByRole("button", { name: "Send" }).click();
    await answers.nth(i).getByText(/Used: /).waitFor();
  }
  await page.getByRole("group", { name: "Agent calculator-agent", exact: true }).click();
  await page.waitForTimeout(600); // the fit's and the glow's animations settle
  await page.screenshot({ path: path.join(out, "ui-canvas.png") });
  await page.getByRole("region", { name: "Chat" }).screenshot({ path: path.join(out, "ui-chat.png") });
  console.log(`wrote ${path.join(out, "ui-canvas.png")} and ui-chat.png`);
} finally {
  await browser.close();
}
