/**
 * The page's icons as inline SVG, drawn in the text's colour (`currentColor`) at the text's size:
 * no emoji or symbol font needed (without one, an emoji shows as an empty box).
 * Decorative by default (`aria-hidden`); give `title` when the icon alone carries the meaning.
 */
import type { ReactNode } from "react";

interface IconProps {
  /** Read by screen readers and shown as a tooltip; without it the icon is hidden from them. */
  title?: string;
  className?: string;
}

function Icon({ title, className, children }: IconProps & { children: ReactNode }) {
  return (
    <svg
      className={`icon${className ? ` ${className}` : ""}`}
      viewBox="0 0 16 16"
      width="1em"
      height="1em"
      fill="none"
      stroke="currentColor"
      strokeWidth="1.8"
      strokeLinecap="round"
      strokeLinejoin="round"
      role={title ? "img" : undefined}
      aria-label={title}
      aria-hidden={title ? undefined : true}
      focusable="false"
    >
      {title ? <title>{title}</title> : null}
      {children}
    </svg>
  );
}

/** A padlock: the tool requires a person's approval. */
export function LockIcon(props: IconProps) {
  return (
    <Icon {...props}>
      <rect x="3" y="7" width="10" height="7.5" rx="1.5" fill="currentColor" stroke="none" />
      <path d="M5 7V5a3 3 0 0 1 6 0v2" />
    </Icon>
  );
}

/** Two bars: paused (waiting for a person). */
export function PauseIcon(props: IconProps) {
  return (
    <Icon {...props}>
      <path d="M5.5 3.5v9M10.5 3.5v9" strokeWidth="2.4" />
    </Icon>
  );
}

/** A tick: passed. */
export function CheckIcon(props: IconProps) {
  return (
    <Icon {...props}>
      <path d="M3 8.5l3.2 3.2L13 4.5" />
    </Icon>
  );
}

/** A cross: failed. */
export function CrossIcon(props: IconProps) {
  return (
    <Icon {...props}>
      <path d="M4 4l8 8M12 4l-8 8" />
    </Icon>
  );
}

/** An empty circle: not started yet. */
export function CircleIcon(props: IconProps) {
  return (
    <Icon {...props}>
      <circle cx="8" cy="8" r="5" />
    </Icon>
  );
}

/** A half-filled circle: under way. */
export function HalfCircleIcon(props: IconProps) {
  return (
    <Icon {...props}>
      <circle cx="8" cy="8" r="5" />
      <path d="M8 3a5 5 0 0 1 0 10z" fill="currentColor" stroke="none" />
    </Icon>
  );
}

/** A circling arrow: sent back, to be done again. */
export function RetryIcon(props: IconProps) {
  return (
    <Icon {...props}>
      <path d="M12.5 8a4.5 4.5 0 1 1-1.3-3.2" />
      <path d="M12 2.5v2.8H9.2" />
    </Icon>
  );
}
