import { describe, expect, it } from "vitest";
import { base, fakeMaster, timers } from "./fakes";
import { GLOW_FADE_MS, createAppStore } from "./store";

describe("store: chat", () => {
  const stream = [
    'event: tool_call\ndata: {"call_id": "c1", "agent_id": "demo", "tool_name": "echo", "arguments": {"text": "hi"}}\n\n',
    'event: tool_result\ndata: {"call_id": "c1", "agent_id": "demo", "tool_name": "echo", "success": true, "result": {"echo": "hi"}}\n\n',
    'event: token\ndata: {"text": "hi"}\n\n',
    'event: query_result\ndata: {"query_id": "q", "session_id": "s1", "success": true, "answer": "hi", "agents_used": [{"agent_id": "demo", "tool_name": "echo"}], "status": "completed"}\n\n',
  ].join("");

  it("scopes the query to linked agents, logs the call, glows the agent and fades it after 4 s", async () => {
    const master = fakeMaster({ stream });
    const t = timers();
    const store = createAppStore({ ...base, fetch: master.fetch, setTimer: t.setTimer, clearTimer: t.clearTimer });
    await store.getState().connect("http://m", "");
    await store.getState().link("demo");
    await store.getState().send("say hi");
    const query = master.calls.find((c) => c.path === "/query");
    expect(query?.body).toMatchObject({ query: "say hi", allowed_agent_ids: ["demo"], stream: true });
    const s = store.getState();
    expect(s.sessionId).toBe("s1");
    expect(s.glow["agent:demo"]?.phase).toBe("fading");
    expect(s.callLogs.demo).toMatchObject([{ toolName: "echo", state: "ok", result: { echo: "hi" } }]);
    expect(s.transcript.map((e) => e.kind)).toEqual(["user", "assistant"]);
    t.fire(GLOW_FADE_MS);
    expect(store.getState().glow["agent:demo"]).toBeUndefined();
    expect(store.getState().curl()).toContain('"allowed_agent_ids":["demo"]');
  });

  const attached = [{ filename: "notes.md", mime_type: "text/markdown", content_base64: "aGVsbG8=" }];

  it("takes the master's attachment limits and lists the session's files after an attached query", async () => {
    const master = fakeMaster({ stream });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    expect(store.getState().maxAttachmentBytes).toBe(4096);
    expect(store.getState().maxAttachments).toBe(3);
    expect(await store.getState().send("what is in it?", attached)).toBe(true);
    expect(master.calls.find((c) => c.path === "/query")?.body).toMatchObject({ attachments: attached });
    expect(store.getState().sessionFiles).toMatchObject([{ filename: "notes.md", status: "indexed", chunks: 1 }]);
    await store.getState().newSession();
    expect(store.getState().sessionFiles).toEqual([]);
  });

  it("shows a streamed attachment refusal naming the file, and reports it as refused", async () => {
    const refusal =
      'event: query_result\ndata: {"query_id": "q", "success": false, "error_code": "attachment_too_large", "error": "attachment \'big.txt\' is 5000 bytes; the limit is 4096 bytes per file (RAG_MAX_ATTACHMENT_BYTES)", "status": "failed"}\n\n';
    const master = fakeMaster({ stream: refusal });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    expect(await store.getState().send("x", attached)).toBe(false);
    expect(store.getState().attachmentError).toMatch(/^413 · attachment 'big.txt' is 5000 bytes/);
    expect(store.getState().notices.at(-1)?.text).toMatch(/big.txt/);
    expect(store.getState().sessionFiles).toEqual([]);
  });

  it("shows a plain 400 refusal of an attachment with the master's message", async () => {
    const body = { success: false, error_code: "invalid_attachment", error: "attachment 'r.pdf': declared as application/pdf but the content is plain text" };
    const master = fakeMaster({ refuse: { status: 400, body } });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    expect(await store.getState().send("x", attached)).toBe(false);
    expect(store.getState().attachmentError).toBe("400 Bad request: attachment 'r.pdf': declared as application/pdf but the content is plain text");
  });

  it("New session clears the transcript and deletes the server-side session", async () => {
    const master = fakeMaster({ stream });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().send("hi");
    await store.getState().newSession();
    expect(store.getState().transcript).toEqual([]);
    expect(store.getState().sessionId).toBeNull();
    expect(master.calls.some((c) => c.method === "DELETE" && c.path === "/sessions/s1")).toBe(true);
  });
});
