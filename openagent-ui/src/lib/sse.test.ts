import { describe, expect, it } from "vitest";
import { SseParser, parseSse } from "./sse";

describe("SseParser", () => {
  it("parses named events with JSON data", () => {
    const events = parseSse('event: token\ndata: {"text": "Hi"}\n\nevent: query_result\ndata: {"success": true}\n\n');
    expect(events).toEqual([
      { event: "token", data: '{"text": "Hi"}' },
      { event: "query_result", data: '{"success": true}' },
    ]);
  });

  it("joins events split across chunks at any byte", () => {
    const text = 'event: step\ndata: {"step": 1}\n\nevent: token\r\ndata: a\r\n\r\n';
    for (let cut = 1; cut < text.length; cut++) {
      const parser = new SseParser();
      const events = [...parser.feed(text.slice(0, cut)), ...parser.feed(text.slice(cut))];
      expect(events.map((e) => e.event)).toEqual(["step", "token"]);
      expect(events[1]?.data).toBe("a");
    }
  });

  it("joins multi-line data, ignores comments, defaults the name to message", () => {
    expect(parseSse(": keep-alive\ndata: one\ndata: two\n\n")).toEqual([{ event: "message", data: "one\ntwo" }]);
  });

  it("drops an event that the stream ends before its blank line", () => {
    const parser = new SseParser();
    expect(parser.feed("event: token\ndata: partial\n")).toEqual([]);
    expect(parser.end()).toEqual([]);
  });
});
