import { describe, expect, it } from "vitest";
import { edgeEnds, type Box } from "./edges";

const orchestrator: Box = { x: 0, y: 0, width: 200, height: 80 };
const at = (x: number, y: number): Box => ({ x, y, width: 180, height: 70 });

describe("edgeEnds", () => {
  it("an agent right of the orchestrator links its left side to the orchestrator's right side", () => {
    expect(edgeEnds(at(400, 10), orchestrator)).toEqual({ source: { x: 400, y: 45, side: "left" }, target: { x: 200, y: 40, side: "right" } });
  });

  it("an agent left of the orchestrator links its right side to the orchestrator's left side", () => {
    expect(edgeEnds(at(-400, 200), orchestrator)).toEqual({ source: { x: -220, y: 235, side: "right" }, target: { x: 0, y: 40, side: "left" } });
  });

  it("one above the other uses the top and bottom sides", () => {
    expect(edgeEnds(at(30, 300), orchestrator)).toEqual({ source: { x: 120, y: 300, side: "top" }, target: { x: 100, y: 80, side: "bottom" } });
    expect(edgeEnds(at(-60, -250), orchestrator).source.side).toBe("bottom");
  });

  it("a diagonal neighbour takes the sides with the larger gap between them", () => {
    // 220 px apart horizontally (gap 30), 400 px vertically (gap 325): top/bottom.
    expect(edgeEnds(at(220, 400), orchestrator).source.side).toBe("top");
    // 600 px apart horizontally (gap 410), 150 px vertically (gap 75): left/right.
    expect(edgeEnds(at(600, 150), orchestrator).source.side).toBe("left");
  });
});
