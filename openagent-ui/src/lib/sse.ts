/**
 * An incremental parser of Server-Sent Events (the `text/event-stream` format), for
 * `POST /query` with `stream: true`. `EventSource` cannot POST, so the page reads the
 * response body itself and feeds the chunks here.
 */
import type { RunEvent } from "../api/types";

export interface SseEvent {
  /** The `event:` field; "message" when the event has none. */
  event: string;
  /** The `data:` lines joined with "\n". */
  data: string;
}

export class SseParser {
  private buffer = "";
  private eventName = "";
  private dataLines: string[] = [];

  /** Feed a chunk of text; returns the events it completed. */
  feed(chunk: string): SseEvent[] {
    this.buffer += chunk;
    const events: SseEvent[] = [];
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      if (match === null) break;
      // A lone "\r" at the very end may be the first half of "\r\n": wait for more.
      if (match[0] === "\r" && match.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const event = this.line(line);
      if (event !== null) events.push(event);
    }
    return events;
  }

  /** End of stream: an event not closed by a blank line is dropped, as the format says. */
  end(): SseEvent[] {
    this.buffer = "";
    this.eventName = "";
    this.dataLines = [];
    return [];
  }

  private line(line: string): SseEvent | null {
    if (line === "") {
      if (this.dataLines.length === 0) {
        this.eventName = "";
        return null;
      }
      const event = { event: this.eventName || "message", data: this.dataLines.join("\n") };
      this.eventName = "";
      this.dataLines = [];
      return event;
    }
    if (line.startsWith(":")) return null; // comment / keep-alive
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.eventName = value;
    else if (field === "data") this.dataLines.push(value);
    return null;
  }
}

/** Parse a whole stream at once (tests, small bodies). */
export function parseSse(text: string): SseEvent[] {
  const parser = new SseParser();
  return parser.feed(text);
}

/**
 * The typed run event of one SSE event of `POST /query`: its data, with the event's name as its
 * `type` (the name is the master's word; a master from before typed events left `type` out of
 * the data). `null` when the data is not a JSON object.
 */
export function runEventOf(name: string, data: string): RunEvent | null {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return null;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  return { ...(value as Record<string, unknown>), type: name } as RunEvent;
}
