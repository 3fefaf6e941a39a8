import { useCallback, useEffect, useState, type KeyboardEvent, type PointerEvent } from "react";

const KEY = "openagent.ui.chatHeight";
const MIN = 160;
/** The header and a usable canvas stay above the chat. */
const ROOM_ABOVE = 260;
const STEP = 24;

function clamp(height: number): number {
  const max = Math.max(MIN, window.innerHeight - ROOM_ABOVE);
  return Math.round(Math.min(max, Math.max(MIN, height)));
}

function stored(): number | null {
  try {
    const value = Number(localStorage.getItem(KEY));
    return Number.isFinite(value) && value > 0 ? value : null;
  } catch {
    return null;
  }
}

function remember(height: number) {
  try {
    localStorage.setItem(KEY, String(height));
  } catch {
    /* not remembered */
  }
}

/**
 * The bar between the canvas and the chat: drag it (or focus it and use the arrow keys) to
 * give the chat more or less room. The height is kept in local storage for the next visit.
 */
export function ChatResizer() {
  const [height, setHeight] = useState<number | null>(() => {
    const value = stored();
    return value === null ? null : clamp(value);
  });
  const [dragging, setDragging] = useState(false);

  useEffect(() => {
    const root = document.documentElement;
    if (height === null) root.style.removeProperty("--chat-height");
    else root.style.setProperty("--chat-height", `${height}px`);
  }, [height]);

  const current = useCallback(() => height ?? document.querySelector<HTMLElement>(".chat")?.getBoundingClientRect().height ?? 300, [height]);

  const onPointerDown = (event: PointerEvent<HTMLDivElement>) => {
    event.preventDefault();
    event.currentTarget.setPointerCapture(event.pointerId);
    setDragging(true);
  };
  const onPointerMove = (event: PointerEvent<HTMLDivElement>) => {
    if (dragging) setHeight(clamp(window.innerHeight - event.clientY));
  };
  const onPointerUp = (event: PointerEvent<HTMLDivElement>) => {
    if (!dragging) return;
    event.currentTarget.releasePointerCapture(event.pointerId);
    setDragging(false);
    const next = clamp(window.innerHeight - event.clientY);
    setHeight(next);
    remember(next);
  };
  const onKeyDown = (event: KeyboardEvent<HTMLDivElement>) => {
    const delta = event.key === "ArrowUp" ? STEP : event.key === "ArrowDown" ? -STEP : 0;
    if (!delta) return;
    event.preventDefault();
    const next = clamp(current() + delta);
    setHeight(next);
    remember(next);
  };

  return (
    <div
      className={`chat-resizer${dragging ? " dragging" : ""}`}
      role="separator"
      aria-orientation="horizontal"
      aria-label="Resize chat"
      aria-valuenow={Math.round(current())}
      aria-valuemin={MIN}
      tabIndex={0}
      title="Drag to resize the chat (or use the arrow keys)"
      onPointerDown={onPointerDown}
      onPointerMove={onPointerMove}
      onPointerUp={onPointerUp}
      onKeyDown={onKeyDown}
    />
  );
}
