import { describe, expect, it } from "vitest";
import { base, sandboxMaster } from "./fakes";
import { createAppStore } from "./store";

describe("store: sandbox", () => {
  it("Deploy and linking take one path: POST start with the module and new_pod, then the Pod status is listed", async () => {
    const master = sandboxMaster();
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    expect(store.getState().sandboxEnabled).toBe(true);

    await store.getState().link("weather");
    const starts = () => master.calls.filter((c) => c.path === "/internal/sandbox-agent/start");
    expect(starts().map((c) => c.body)).toEqual([{ agent_id: "weather", module: "agents.weather", placement: "new_pod" }]);
    expect(store.getState().linkNotes.weather).toEqual({ kind: "deployed", text: "Deployed to the sandbox (Pod oa-agent-weather); waiting for it to connect" });
    // Refreshed at once: the node has its Pod status.
    expect(store.getState().catalogById.weather).toMatchObject({ status: "offline", module: "agents.weather", sandbox: { phase: "Pending", pod: "oa-agent-weather" } });

    // Linking again leaves the starting deployment alone; Deploy replaces it on purpose.
    store.getState().unlink("weather");
    await store.getState().link("weather");
    expect(starts()).toHaveLength(1);
    expect(await store.getState().deploy("weather")).toBe(true);
    expect(starts()).toHaveLength(2);
    expect(starts()[1]!.body).toEqual(starts()[0]!.body);
  });

  it("linking with the sandbox on but no agents/ or system_agents/ module shows the start command instead", async () => {
    const master = sandboxMaster();
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().link("sampled");
    expect(master.calls.some((c) => c.path === "/internal/sandbox-agent/start")).toBe(false);
    expect(store.getState().linkNotes.sampled).toEqual({ kind: "start", text: "MASTER_WS=ws://m/ws PYTHONPATH=. python -m sample_agents.sampled" });
    expect(await store.getState().deploy("sampled")).toBe(false);
    expect(store.getState().linkNotes.sampled?.kind).toBe("error");
    expect(await store.getState().deploy("document-indexer-agent")).toBe(true);
    expect(master.calls.find((c) => c.path === "/internal/sandbox-agent/start")?.body).toEqual({ agent_id: "document-indexer-agent", module: "system_agents.document_indexer_agent", placement: "new_pod" });
  });

  it("Stop tears the deployment down and the row loses its status; a second Stop shows the master's 404", async () => {
    const master = sandboxMaster();
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().deploy("weather");
    await store.getState().stopDeployment("weather");
    expect(master.calls.find((c) => c.path === "/internal/sandbox-agent/stop")?.body).toEqual({ agent_id: "weather" });
    expect(store.getState().linkNotes.weather?.kind).toBe("stopped");
    expect(store.getState().catalogById.weather?.sandbox).toBeUndefined();

    await store.getState().stopDeployment("weather");
    expect(store.getState().linkNotes.weather).toEqual({ kind: "error", text: "404 Not found: agent 'weather' has no sandbox workload" });
    expect(store.getState().notices.at(-1)?.text).toContain("Stopping weather failed");
  });

  it("Logs loads the log tail into the dialog", async () => {
    const master = sandboxMaster();
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().openSandboxLogs("weather");
    expect(master.calls.at(-1)?.path).toBe("/internal/sandbox-agent/logs?agent_id=weather&tail_lines=200");
    expect(store.getState().sandboxLogs).toEqual({
      open: true,
      agentId: "weather",
      phase: "done",
      lines: ["starting", "Traceback: boom"],
      podName: "oa-agent-weather",
      error: null,
    });
    store.getState().closeSandboxLogs();
    expect(store.getState().sandboxLogs.open).toBe(false);
  });

  it.each([
    [403, { detail: "the Kubernetes sandbox is off: set OPENAGENT_K8S_SANDBOX=1" }, "403 Forbidden: the master refused it: the Kubernetes sandbox is off: set OPENAGENT_K8S_SANDBOX=1"],
    [503, { detail: "the Kubernetes API at http://k did not answer" }, "503 Unavailable: the Kubernetes API at http://k did not answer"],
    [404, { detail: { code: "not_deployed", message: "agent 'weather' has no sandbox workload" } }, "404 Not found: agent 'weather' has no sandbox workload"],
  ])("a failed logs request (%i) shows the master's message", async (status, body, message) => {
    const master = sandboxMaster({ logs: { status, body } });
    const store = createAppStore({ ...base, fetch: master.fetch });
    await store.getState().connect("http://m", "");
    await store.getState().openSandboxLogs("weather");
    expect(store.getState().sandboxLogs).toMatchObject({ open: true, phase: "error", lines: [], error: message });
  });
});
