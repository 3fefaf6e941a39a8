import { test as base, expect, type Locator, type Page } from "@playwright/test";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export interface Stack {
  ui: string;
  master: string;
  api_key: string;
  /** A second master with the Kubernetes sandbox on (fake API server); `null` with OPENAGENT_E2E_SANDBOX=0. */
  sandbox_master?: string | null;
}

const here = path.dirname(fileURLToPath(import.meta.url));

export const AGENT = "demo-invocation-agent";

export const test = base.extend<{ stack: Stack; app: App }>({
  stack: async ({}, use) => {
    await use(JSON.parse(readFileSync(path.join(here, ".stack", "stack.json"), "utf8")) as Stack);
  },
  app: async ({ page, stack }, use) => {
    await use(new App(page, stack));
  },
});
export { expect };

/** The page, driven by roles and labels. */
export class App {
  constructor(
    readonly page: Page,
    readonly stack: Stack,
  ) {}

  async open(): Promise<void> {
    await this.page.goto(this.stack.ui);
  }

  async connect(key = this.stack.api_key): Promise<void> {
    await this.page.getByLabel("Master URL").fill(this.stack.master);
    await this.page.getByLabel("API key").fill(key);
    await this.page.getByRole("button", { name: "Connect", exact: true }).click();
  }

  async openConnected(): Promise<void> {
    await this.open();
    await this.connect();
    await expect(this.page.getByRole("status", { name: "Master status" })).toContainText("Connected");
  }

  node(name: string): Locator {
    return this.page.getByRole("group", { name, exact: true });
  }

  agentNode(agentId = AGENT): Locator {
    return this.node(`Agent ${agentId}`);
  }

  sidebarRow(label: string): Locator {
    return this.page.getByRole("list", { name: "Agent list" }).getByRole("listitem", { name: label });
  }

  /** Drag the sidebar row onto the canvas, right of the orchestrator. */
  async dragOntoCanvas(label = AGENT): Promise<void> {
    const canvas = this.page.getByRole("region", { name: "Canvas" });
    const box = (await canvas.boundingBox())!;
    await this.sidebarRow(label).dragTo(canvas, { targetPosition: { x: box.width * 0.75, y: box.height * 0.3 } });
    await expect(this.agentNode(label === AGENT ? AGENT : label)).toBeVisible();
  }

  /** Drag from the agent's handle to the orchestrator, as a user links them. */
  async linkByDragging(agentId = AGENT): Promise<void> {
    const handle = this.page.getByTitle(`Link ${agentId}`);
    const target = this.node("Orchestrator");
    const from = (await handle.boundingBox())!;
    const to = (await target.boundingBox())!;
    await this.page.mouse.move(from.x + from.width / 2, from.y + from.height / 2);
    await this.page.mouse.down();
    await this.page.mouse.move(to.x + to.width / 2, to.y + to.height / 2, { steps: 12 });
    await this.page.mouse.move(to.x + to.width - 4, to.y + to.height / 2, { steps: 4 });
    await this.page.mouse.up();
  }

  async ask(question: string): Promise<void> {
    await this.page.getByLabel("Message", { exact: true }).fill(question);
    await this.page.getByRole("button", { name: "Send" }).click();
  }

  lastAnswer(): Locator {
    return this.page.getByRole("log", { name: "Transcript" }).getByRole("listitem", { name: "Orchestrator answer" }).last();
  }
}
