import { describe, expect, it } from "vitest";
import { agentRow } from "../api/fixtures";
import { TRANSPORT_LABEL, fromAgentRow } from "./agents";
import { KEY_PLACEHOLDER, mcpClientSnippets, mcpEndpoint } from "./mcpClients";
import { agentSpec, exportWorkspace, parseWorkspace, workspaceEntries, WorkspaceError } from "./workspace";

describe("mcpClientSnippets", () => {
  it("points every client at the master's /mcp endpoint", () => {
    expect(mcpEndpoint("http://127.0.0.1:8000/")).toBe("http://127.0.0.1:8000/mcp");
    const snippets = mcpClientSnippets("http://hub.local:8000", true);
    expect(snippets.map((s) => s.client)).toEqual(["Claude Desktop", "Cursor", "VS Code"]);
    const [claude, cursor, vscode] = snippets.map((s) => JSON.parse(s.json));
    expect(claude.mcpServers.openagent).toEqual({
      command: "npx",
      args: ["-y", "mcp-remote", "http://hub.local:8000/mcp", "--header", "Authorization:${OPENAGENT_AUTH}"],
      env: { OPENAGENT_AUTH: `Bearer ${KEY_PLACEHOLDER}` },
    });
    expect(cursor.mcpServers.openagent).toEqual({
      url: "http://hub.local:8000/mcp",
      headers: { Authorization: `Bearer ${KEY_PLACEHOLDER}` },
    });
    expect(vscode.servers.openagent).toEqual({
      type: "http",
      url: "http://hub.local:8000/mcp",
      headers: { Authorization: "Bearer ${input:openagent-api-key}" },
    });
    expect(vscode.inputs[0]).toMatchObject({ id: "openagent-api-key", password: true });
  });

  it("writes no header for a master without an API key", () => {
    for (const snippet of mcpClientSnippets("http://127.0.0.1:8000", false)) {
      expect(snippet.json).not.toContain("Authorization");
      expect(snippet.json).not.toContain(KEY_PLACEHOLDER);
      expect(snippet.json).toContain("http://127.0.0.1:8000/mcp");
    }
  });
});

describe("transports", () => {
  it("names each GET /agents connection type", () => {
    const mcp = fromAgentRow(agentRow({ agent_id: "gh", connection_type: "mcp", status: "UP", mcp_url: "http://x:9/mcp" }));
    expect([mcp.transport, mcp.status, mcp.remoteUrl]).toEqual(["mcp", "UP", "http://x:9/mcp"]);
    expect(fromAgentRow(agentRow({ agent_id: "a", connection_type: "a2a", a2a_url: "http://y" })).transport).toBe("a2a");
    expect(fromAgentRow(agentRow({ agent_id: "s", connection_type: "sandbox" })).transport).toBe("websocket");
    expect(TRANSPORT_LABEL).toEqual({ websocket: "WebSocket", invocation: "HTTP", mcp: "MCP", a2a: "A2A" });
  });
});

const MCP_YAML = `version: 2
agents:
  - agent_id: github
    transport: mcp
    mcp_url: https://mcp.example.com/mcp
    mcp_headers:
      Authorization: Bearer \${MCP_TOKEN}
    tools: [{name: search_issues}]
links:
  - source: github
`;

describe("MCP agents in workspaces", () => {
  it("round-trips the URL and header references", () => {
    const workspace = parseWorkspace(MCP_YAML);
    const [entry] = workspaceEntries(workspace);
    expect(entry).toMatchObject({ transport: "mcp", remoteUrl: "https://mcp.example.com/mcp" });
    expect(entry?.mcpHeaders).toEqual({ Authorization: "Bearer ${MCP_TOKEN}" });
    const spec = agentSpec(entry as Parameters<typeof agentSpec>[0]);
    expect(spec).toMatchObject({ transport: "mcp", mcp_url: "https://mcp.example.com/mcp", mcp_headers: { Authorization: "Bearer ${MCP_TOKEN}" } });
    expect(exportWorkspace({ ...workspace, agents: [spec] })).toContain("Authorization: Bearer ${MCP_TOKEN}");
    expect(parseWorkspace(MCP_YAML.replace("version: 2", "version: 1")).version).toBe(2);
  });

  it("refuses a literal header value without repeating it", () => {
    const literal = MCP_YAML.replace("Bearer ${MCP_TOKEN}", "Bearer ghp_verysecretvalue123");
    let error: unknown;
    try {
      parseWorkspace(literal);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(WorkspaceError);
    const message = (error as Error).message;
    expect(message).toContain("must refer to an environment variable");
    expect(message).not.toContain("ghp_verysecretvalue123");
  });
});
