/**
 * Browser benchmark (not a test): a 200-agent workspace, from choosing the YAML file to an
 * interactive canvas. `npm run bench` (needs the e2e stack, started by the global setup).
 *
 * load-to-interactive: Import YAML → all 200 agents laid out, linked and fitted in view →
 * a click on one agent selects it and the details panel shows it. Median of 5 runs, written
 * to ../bench/results/ui_load_200.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { expect, test } from "../e2e/fixtures";
import { agentNode, baseEdges, baseNodes, linkEdge, ringPositions } from "../src/lib/graph";
import { canvasToWorkspace, exportWorkspace } from "../src/lib/workspace";
import type { CatalogEntry } from "../src/lib/agents";

const AGENTS = 200;
const RUNS = 5;
const results = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../bench/results");

function workspace(): string {
  const ids = Array.from({ length: AGENTS }, (_, i) => `agent-${String(i).padStart(3, "0")}`);
  const positions = ringPositions(AGENTS, [{ x: 0, y: 0 }, { x: -420, y: 0 }]);
  const entries = new Map<string, CatalogEntry>(
    ids.map((id) => [
      id,
      {
        agentId: id, label: id, transport: "invocation", role: "action", source: "workspace", status: "offline",
        invocationBaseUrl: `http://127.0.0.1:9/${id}`,
        tools: [{ name: "run", description: `Tool of ${id}`, parameters: { type: "object", properties: { q: { type: "string" } } }, endpoint: "/run" }],
      },
    ]),
  );
  const nodes = [...baseNodes(), ...ids.map((id, i) => agentNode(id, positions[i]!))];
  const edges = [...baseEdges(), ...ids.map(linkEdge)];
  return exportWorkspace(canvasToWorkspace({ nodes, edges }, entries, { baseUrl: "http://127.0.0.1:8000", wsUrl: "ws://127.0.0.1:8000/ws" }));
}

test("200-agent workspace: load to interactive", async ({ app, page }) => {
  test.setTimeout(300_000);
  const yaml = workspace();
  const samples: { load_ms: number; interactive_ms: number }[] = [];
  for (let run = 0; run < RUNS; run++) {
    await app.open();
    await expect(app.node("Orchestrator")).toBeVisible();
    // Timed in the page, frame by frame: from the file input's change event to every agent node
    // laid out and measured (visible), then to the details panel answering a click on one of them.
    const timing = page.evaluate(
      (count) =>
        new Promise<{ load_ms: number; interactive_ms: number }>((resolve) => {
          document.addEventListener(
            "change",
            () => {
              const start = performance.now();
              const loaded = () =>
                [...document.querySelectorAll<HTMLElement>(".react-flow__node-agent")].filter((n) => n.style.visibility !== "hidden").length >= count;
              const waitFor = (done: () => boolean, then: (t: number) => void) => {
                const tick = () => (done() ? then(performance.now()) : requestAnimationFrame(tick));
                requestAnimationFrame(tick);
              };
              waitFor(loaded, (loadedAt) => {
                document.querySelector<HTMLElement>('[data-id="agent:agent-123"]')!.click();
                const shown = () => document.querySelector('[aria-label="Node details"] h2')?.textContent === "agent-123";
                waitFor(shown, (at) => resolve({ load_ms: loadedAt - start, interactive_ms: at - start }));
              });
            },
            { capture: true, once: true },
          );
        }),
      AGENTS,
    );
    await page.getByLabel("Import YAML").setInputFiles({ name: "ws.yaml", mimeType: "application/yaml", buffer: Buffer.from(yaml) });
    const sample = await timing;
    await expect(app.node("Orchestrator")).toContainText(`${AGENTS} linked agents`);
    samples.push({ load_ms: Math.round(sample.load_ms), interactive_ms: Math.round(sample.interactive_ms) });
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const summary = {
    case: "ui_load_200",
    agents: AGENTS,
    runs: RUNS,
    median_load_ms: median(samples.map((s) => s.load_ms)),
    median_load_to_interactive_ms: median(samples.map((s) => s.interactive_ms)),
    samples,
    browser: "Debian chromium (headless)",
    at: new Date().toISOString(),
  };
  mkdirSync(results, { recursive: true });
  writeFileSync(path.join(results, "ui_load_200.json"), JSON.stringify(summary, null, 2) + "\n");
  console.log(JSON.stringify(summary));
});
