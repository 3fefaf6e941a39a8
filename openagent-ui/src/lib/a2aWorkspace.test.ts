import { describe, expect, it } from "vitest";
import { agentSpec, exportWorkspace, parseWorkspace, workspaceEntries, WorkspaceError } from "./workspace";

// The export of tests/openagent/workspace/test_a2a_agents.py: both exporters write the same bytes.
const A2A_YAML = `# OpenAgent workspace, schema version 2 (docs/workspace.schema.json)
version: 2
master:
  base_url: http://127.0.0.1:8000
  ws_url: ws://127.0.0.1:8000/ws
agents:
- agent_id: currency-agent
  transport: a2a
  a2a_url: https://currency.example/a2a
  a2a_headers:
    Authorization: Bearer \${A2A_TOKEN}
    X-Tenant: \${TENANT}
  tools:
  - name: convert_currency
    description: Convert an amount between currencies
    parameters:
      type: object
      properties: {}
links:
- source: currency-agent
  target: orchestrator
layout:
  nodes:
    orchestrator:
      x: 0
      y: 0
`;

describe("A2A agents in workspaces", () => {
  it("round-trips the URL and header references, byte for byte with the SDK's export", () => {
    const workspace = parseWorkspace(A2A_YAML);
    const [entry] = workspaceEntries(workspace);
    expect(entry).toMatchObject({ transport: "a2a", remoteUrl: "https://currency.example/a2a" });
    expect(entry?.a2aHeaders).toEqual({ Authorization: "Bearer ${A2A_TOKEN}", "X-Tenant": "${TENANT}" });
    const spec = agentSpec(entry!);
    expect(spec).toMatchObject({ transport: "a2a", a2a_url: "https://currency.example/a2a" });
    expect(spec.mcp_headers).toBeUndefined();
    expect(exportWorkspace({ ...workspace, agents: [spec] })).toBe(A2A_YAML);
  });

  it("refuses a literal header value without repeating it, and A2A fields on another transport", () => {
    const refusal = (yaml: string): string => {
      try {
        parseWorkspace(yaml);
      } catch (caught) {
        expect(caught).toBeInstanceOf(WorkspaceError);
        return (caught as Error).message;
      }
      throw new Error("accepted");
    };
    const literal = refusal(A2A_YAML.replace("Bearer ${A2A_TOKEN}", "Bearer a2a-verysecretvalue"));
    expect(literal).toContain("must refer to an environment variable");
    expect(literal).not.toContain("a2a-verysecretvalue");
    expect(refusal(A2A_YAML.replace("  a2a_url: https://currency.example/a2a\n", ""))).toContain("transport 'a2a' needs a2a_url");
    expect(refusal(A2A_YAML.replace("transport: a2a", "transport: mcp\n  mcp_url: http://x/mcp"))).toContain(
      "a2a_url and a2a_headers are only for transport 'a2a'",
    );
  });
});
