/**
 * Where a link between two nodes starts and ends: on the sides of their boxes that face each
 * other, so an edge never leaves a node on its far side and runs behind it. Pure geometry over
 * boxes in flow coordinates; the canvas's floating edge draws its path between these points.
 */

export type Side = "left" | "right" | "top" | "bottom";

export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface EdgeEnd {
  x: number;
  y: number;
  side: Side;
}

function middleOf(box: Box, side: Side): EdgeEnd {
  switch (side) {
    case "left":
      return { x: box.x, y: box.y + box.height / 2, side };
    case "right":
      return { x: box.x + box.width, y: box.y + box.height / 2, side };
    case "top":
      return { x: box.x + box.width / 2, y: box.y, side };
    case "bottom":
      return { x: box.x + box.width / 2, y: box.y + box.height, side };
  }
}

/**
 * The facing sides of two boxes: left/right when the horizontal gap between them is the larger
 * one (side by side), top/bottom otherwise (one above the other), each at the side's middle.
 */
export function edgeEnds(source: Box, target: Box): { source: EdgeEnd; target: EdgeEnd } {
  const dx = target.x + target.width / 2 - (source.x + source.width / 2);
  const dy = target.y + target.height / 2 - (source.y + source.height / 2);
  const gapX = Math.abs(dx) - (source.width + target.width) / 2;
  const gapY = Math.abs(dy) - (source.height + target.height) / 2;
  if (gapX >= gapY) {
    return dx >= 0
      ? { source: middleOf(source, "right"), target: middleOf(target, "left") }
      : { source: middleOf(source, "left"), target: middleOf(target, "right") };
  }
  return dy >= 0
    ? { source: middleOf(source, "bottom"), target: middleOf(target, "top") }
    : { source: middleOf(source, "top"), target: middleOf(target, "bottom") };
}
