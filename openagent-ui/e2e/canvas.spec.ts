/**
 * The canvas as a user sees it, checked by geometry rather than pixels: where edges attach,
 * that fit-view shows every node, where the minimap and the notices sit, the chat's size.
 */
import type { Page, TestInfo } from "@playwright/test";
import { AGENT, expect, test } from "./fixtures";

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}
interface Point {
  x: number;
  y: number;
}

/** A workspace with agents at the given flow positions, each linked to the orchestrator when `linked`. */
function workspace(agents: { id: string; x: number; y: number; linked?: boolean }[]): Buffer {
  const lines = [
    "version: 1",
    "master: { base_url: 'http://127.0.0.1:8000', ws_url: 'ws://127.0.0.1:8000/ws' }",
    "agents:",
    ...agents.flatMap((a) => [
      `  - agent_id: ${a.id}`,
      "    transport: websocket",
      `    handler: agents.${a.id.replace(/-/g, "_")}`,
      "    tools: [{ name: greet, description: Greet, parameters: { type: object, properties: {} } }]",
    ]),
    "links:",
    ...agents.filter((a) => a.linked).map((a) => `  - { source: ${a.id}, target: orchestrator }`),
    ...(agents.some((a) => a.linked) ? [] : ["  []"]),
    "layout:",
    "  nodes:",
    "    orchestrator: { x: 0, y: 0 }",
    ...agents.map((a) => `    ${a.id}: { x: ${a.x}, y: ${a.y} }`),
  ];
  return Buffer.from(`${lines.join("\n").replace("links:\n  []", "links: []")}\n`);
}

async function importWorkspace(page: Page, yaml: Buffer): Promise<void> {
  await page.getByLabel("Import YAML").setInputFiles({ name: "workspace.yaml", mimeType: "application/yaml", buffer: yaml });
}

async function nodeBox(page: Page, nodeId: string): Promise<Box> {
  const box = await page.locator(`.react-flow__node[data-id="${nodeId}"]`).boundingBox();
  expect(box, `node ${nodeId} is on screen`).not.toBeNull();
  return box!;
}

/** The edge's path in screen coordinates: its two end points and points sampled along it. */
async function edgePath(page: Page, edgeId: string): Promise<{ start: Point; end: Point; samples: Point[] }> {
  const path = page.locator(`.react-flow__edge[data-id="${edgeId}"] path.react-flow__edge-path`);
  await expect(path).toHaveCount(1);
  return path.evaluate((el) => {
    const p = el as SVGPathElement;
    const matrix = p.getScreenCTM()!;
    const length = p.getTotalLength();
    const at = (l: number) => {
      const q = new DOMPoint(p.getPointAtLength(l).x, p.getPointAtLength(l).y).matrixTransform(matrix);
      return { x: q.x, y: q.y };
    };
    const samples = Array.from({ length: 41 }, (_, i) => at((length * i) / 40));
    return { start: at(0), end: at(length), samples };
  });
}

const TOLERANCE = 2;
const centre = (b: Box): Point => ({ x: b.x + b.width / 2, y: b.y + b.height / 2 });

/** The side of `box` that `point` lies on, or null when it is not on the box's outline. */
function sideOf(point: Point, box: Box): "left" | "right" | "top" | "bottom" | null {
  const withinY = point.y >= box.y - TOLERANCE && point.y <= box.y + box.height + TOLERANCE;
  const withinX = point.x >= box.x - TOLERANCE && point.x <= box.x + box.width + TOLERANCE;
  if (withinY && Math.abs(point.x - box.x) <= TOLERANCE) return "left";
  if (withinY && Math.abs(point.x - (box.x + box.width)) <= TOLERANCE) return "right";
  if (withinX && Math.abs(point.y - box.y) <= TOLERANCE) return "top";
  if (withinX && Math.abs(point.y - (box.y + box.height)) <= TOLERANCE) return "bottom";
  return null;
}

/** Whether `side` of `box` faces `other`: the other box's centre lies beyond that side. */
function faces(side: ReturnType<typeof sideOf>, box: Box, other: Box): boolean {
  const c = centre(other);
  switch (side) {
    case "left":
      return c.x < box.x;
    case "right":
      return c.x > box.x + box.width;
    case "top":
      return c.y < box.y;
    case "bottom":
      return c.y > box.y + box.height;
    default:
      return false;
  }
}

const inside = (p: Point, b: Box) => p.x > b.x + TOLERANCE && p.x < b.x + b.width - TOLERANCE && p.y > b.y + TOLERANCE && p.y < b.y + b.height - TOLERANCE;

const intersects = (a: Box, b: Box) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

/** The edge starts and ends on the sides of its two nodes that face each other, and never crosses either box. */
async function expectAttachedToFacingSides(page: Page, edgeId: string, sourceId: string, targetId: string): Promise<void> {
  const [source, target, path] = [await nodeBox(page, sourceId), await nodeBox(page, targetId), await edgePath(page, edgeId)];
  const startSide = sideOf(path.start, source);
  const endSide = sideOf(path.end, target);
  expect(startSide, `${edgeId} starts on the outline of ${sourceId}`).not.toBeNull();
  expect(endSide, `${edgeId} ends on the outline of ${targetId}`).not.toBeNull();
  expect(faces(startSide, source, target), `${edgeId} leaves ${sourceId} by its ${startSide} side, facing ${targetId}`).toBe(true);
  expect(faces(endSide, target, source), `${edgeId} enters ${targetId} by its ${endSide} side, facing ${sourceId}`).toBe(true);
  const behind = path.samples.filter((p) => inside(p, source) || inside(p, target));
  expect(behind, `${edgeId} runs behind a node`).toEqual([]);
}

async function shot(page: Page, info: TestInfo, name: string): Promise<void> {
  await page.screenshot({ path: info.outputPath(`${name}.png`) });
}

test("at first load the query client's edge joins the facing sides, with no stub out of the orchestrator", async ({ app, page }, info) => {
  await app.open();
  await expect(app.node("Orchestrator")).toBeVisible();
  await expectAttachedToFacingSides(page, "link:query-client", "query-client", "orchestrator");
  const orchestrator = await nodeBox(page, "orchestrator");
  const path = await edgePath(page, "link:query-client");
  expect(path.samples.filter((p) => p.x > orchestrator.x + orchestrator.width + TOLERANCE)).toEqual([]);
  await shot(page, info, "first-load");
});

test("edges attach to the nearest sides wherever the agents are, including left of the orchestrator", async ({ app, page }, info) => {
  await app.open();
  await importWorkspace(
    page,
    workspace([
      { id: "left-agent", x: -440, y: -200, linked: true },
      { id: "right-agent", x: 360, y: 40, linked: true },
      { id: "below-agent", x: 10, y: 220, linked: true },
    ]),
  );
  await expect(app.node("Orchestrator")).toContainText("3 linked agents");
  await page.getByRole("button", { name: "Fit view" }).click();
  await expect(app.agentNode("left-agent")).toBeVisible();
  await expect(app.agentNode("below-agent")).toBeVisible();
  await expect(app.agentNode("right-agent")).toBeVisible();
  for (const agent of ["left-agent", "right-agent", "below-agent"]) {
    await expect.poll(async () => (await nodeBox(page, `agent:${agent}`)).width).toBeGreaterThan(0);
    await expectAttachedToFacingSides(page, `link:${agent}`, `agent:${agent}`, "orchestrator");
  }
  await expectAttachedToFacingSides(page, "link:query-client", "query-client", "orchestrator");

  // Dragged from the left to the right of the orchestrator, the edge follows to the facing sides.
  const left = await nodeBox(page, "agent:left-agent");
  const orchestrator = await nodeBox(page, "orchestrator");
  await page.mouse.move(left.x + left.width / 2, left.y + 8);
  await page.mouse.down();
  await page.mouse.move(orchestrator.x + orchestrator.width + 140 + left.width / 2, orchestrator.y - 120, { steps: 10 });
  await page.mouse.up();
  await expectAttachedToFacingSides(page, "link:left-agent", "agent:left-agent", "orchestrator");
  await shot(page, info, "edges");
});

test("fit view fits every node inside the canvas, clear of the zoom buttons and the minimap", async ({ app, page }, info) => {
  await app.open();
  const agents = Array.from({ length: 8 }, (_, i) => ({ id: `agent-${i}`, x: 300 + (i % 2) * 320, y: -420 + i * 120, linked: true }));
  await importWorkspace(page, workspace(agents));
  await expect(app.node("Orchestrator")).toContainText("8 linked agents");
  await page.getByRole("button", { name: "Fit view" }).click();
  const canvas = (await page.getByRole("region", { name: "Canvas" }).boundingBox())!;
  const controls = (await page.locator(".react-flow__controls").boundingBox())!;
  const minimap = (await page.locator(".react-flow__minimap").boundingBox())!;
  const within = (n: Box) => n.x >= canvas.x && n.y >= canvas.y && n.x + n.width <= canvas.x + canvas.width && n.y + n.height <= canvas.y + canvas.height;
  // The fit is animated: wait until every node (the query client, the orchestrator, 8 agents) is whole and uncovered.
  await expect
    .poll(
      async () => {
        const nodes = await page.locator(".react-flow__node").evaluateAll((els) => els.map((e) => e.getBoundingClientRect().toJSON() as Box));
        return nodes.length === 10 && nodes.every((n) => within(n) && !intersects(n, controls) && !intersects(n, minimap));
      },
      { timeout: 10_000 },
    )
    .toBe(true);

  // The wheel scrolls the canvas (it does not zoom).
  const viewport = page.locator(".react-flow__viewport");
  const before = await viewport.getAttribute("style");
  await page.mouse.move(canvas.x + canvas.width / 2, canvas.y + canvas.height / 2);
  await page.mouse.wheel(0, 300);
  await expect.poll(() => viewport.getAttribute("style")).not.toBe(before);
  const scale = (style: string | null) => Number(/scale\(([\d.]+)\)/.exec(style ?? "")?.[1]);
  expect(scale(await viewport.getAttribute("style"))).toBeCloseTo(scale(before), 5);
  await shot(page, info, "several-agents");
});

test("the minimap is dark, stays clear of the nodes, and can be hidden", async ({ app, page }, info) => {
  await app.openConnected();
  await app.sidebarRow(AGENT).getByRole("button", { name: `Add ${AGENT} to canvas` }).click();
  await expect(app.agentNode()).toBeVisible();
  await page.getByRole("button", { name: "Fit view" }).click();
  const minimap = page.locator(".react-flow__minimap");
  await expect(minimap).toBeVisible();
  // Its background and the mask over the part outside the view are both dark (the mask blended over the background).
  const colours = await minimap.evaluate((el) => ({
    background: getComputedStyle(el).backgroundColor,
    mask: getComputedStyle(el.querySelector(".react-flow__minimap-mask")!).fill,
  }));
  const rgba = (colour: string) => {
    const [r, g, b, a] = (colour.match(/[\d.]+/g) ?? []).map(Number);
    return { luminance: 0.2126 * r! + 0.7152 * g! + 0.0722 * b!, alpha: a ?? 1 };
  };
  const background = rgba(colours.background);
  const mask = rgba(colours.mask);
  expect(background.luminance, `minimap background ${colours.background} is dark`).toBeLessThan(60);
  expect(mask.alpha * mask.luminance + (1 - mask.alpha) * background.luminance, `minimap mask ${colours.mask} is dark`).toBeLessThan(60);
  await expect
    .poll(async () => {
      const map = (await minimap.boundingBox())!;
      const nodes = await page.locator(".react-flow__node").evaluateAll((els) => els.map((e) => e.getBoundingClientRect().toJSON() as Box));
      return nodes.filter((n) => intersects(n, map)).length;
    })
    .toBe(0);
  await shot(page, info, "minimap");

  await page.getByRole("button", { name: "Hide minimap" }).click();
  await expect(minimap).toHaveCount(0);
  await page.reload();
  await expect(app.node("Orchestrator")).toBeVisible();
  await expect(minimap).toHaveCount(0);
  await page.getByRole("button", { name: "Show minimap" }).click();
  await expect(minimap).toBeVisible();
});

test("notices go away on their own, never cover a control, and Export YAML confirms", async ({ app, page }, info) => {
  await app.openConnected();
  await app.sidebarRow(AGENT).getByRole("button", { name: `Add ${AGENT} to canvas` }).click();
  await page.getByRole("button", { name: "Link to orchestrator" }).click();
  await expect(app.node("Orchestrator")).toContainText("1 linked agent");

  // An error (a broken import) stays until dismissed.
  await page.getByLabel("Import YAML").setInputFiles({ name: "bad.yaml", mimeType: "application/yaml", buffer: Buffer.from("version: 7\n") });
  const error = page.getByRole("alert").filter({ hasText: "Import failed" });
  await expect(error).toBeVisible();

  const download = page.waitForEvent("download");
  await page.getByRole("button", { name: "Export YAML" }).click();
  await download;
  const confirmation = page.getByRole("status").filter({ hasText: "Exported workspace.yaml: 1 agent, 1 link" });
  await expect(confirmation).toBeVisible();
  await shot(page, info, "notices");

  const notices = await page.locator(".notice").evaluateAll((els) => els.map((e) => e.getBoundingClientRect().toJSON() as Box));
  const controls = await page
    .locator("button, input, select, textarea, [role=separator], .react-flow__minimap, .react-flow__controls")
    .evaluateAll((els) =>
      els
        .filter((e) => !e.closest(".notices") && e.getClientRects().length > 0)
        .map((e) => ({ name: e.getAttribute("aria-label") ?? e.textContent?.trim() ?? e.tagName, box: e.getBoundingClientRect().toJSON() as Box })),
    );
  const covered = controls.filter((c) => c.box.width > 1 && notices.some((n) => intersects(n, c.box))).map((c) => c.name);
  expect(covered).toEqual([]);

  // The confirmation leaves by itself; the error is still there until dismissed.
  await expect(confirmation).toBeHidden({ timeout: 30_000 });
  await expect(error).toBeVisible();
  await error.getByRole("button", { name: "Dismiss notification" }).click();
  await expect(error).toBeHidden();
});

test("the query client node says what the header says about the connection", async ({ app, page }) => {
  await app.open();
  const header = page.getByRole("status", { name: "Master status" });
  const client = app.node("Query Client");
  await expect(header).toContainText("Not connected");
  await expect(client).toContainText("not connected");
  await expect(client).not.toContainText("online");
  await app.connect("not-the-key");
  await expect(page.getByRole("alert").filter({ hasText: "401" })).toBeVisible();
  await expect(client).toContainText("not connected");
  await app.connect();
  await expect(header).toContainText("Connected");
  await expect(client).toContainText("online");
});

test("the chat panel resizes by its bar, remembers its size, and says New session once", async ({ app, page }, info) => {
  await app.openConnected();
  await expect(page.getByText("New session", { exact: true })).toHaveCount(1);
  await expect(page.getByLabel("Session")).toHaveText("No session yet");

  const chat = page.getByRole("region", { name: "Chat" });
  const transcript = page.getByRole("log", { name: "Transcript" });
  const before = (await chat.boundingBox())!;
  const transcriptBefore = (await transcript.boundingBox())!.height;
  const bar = page.getByRole("separator", { name: "Resize chat" });
  const handle = (await bar.boundingBox())!;
  await page.mouse.move(handle.x + handle.width / 2, handle.y + handle.height / 2);
  await page.mouse.down();
  await page.mouse.move(handle.x + handle.width / 2, handle.y + handle.height / 2 - 200, { steps: 8 });
  await page.mouse.up();
  await expect.poll(async () => (await chat.boundingBox())!.height).toBeGreaterThan(before.height + 180);
  expect((await transcript.boundingBox())!.height).toBeGreaterThan(transcriptBefore + 180);
  const resized = (await chat.boundingBox())!.height;
  await shot(page, info, "chat-resized");

  await page.reload();
  await expect(page.getByRole("status", { name: "Master status" })).toContainText("Connected");
  await expect.poll(async () => Math.abs((await chat.boundingBox())!.height - resized)).toBeLessThanOrEqual(2);

  // The keyboard works too.
  await bar.focus();
  await page.keyboard.press("ArrowDown");
  await expect.poll(async () => (await chat.boundingBox())!.height).toBeLessThan(resized - 10);
});
