import { describe, expect, it } from "vitest";
import { ApiError } from "../api/client";
import { argumentsOf, decisionBody, draftOf, fieldsOf, refusalOf, sameArguments, timeLeft, toolOf } from "./approvals";

const TRANSFER = {
  type: "object",
  properties: {
    to: { type: "string", description: "Who gets it" },
    amount: { type: "number", minimum: 0 },
    currency: { type: "string", enum: ["EUR", "USD"] },
    urgent: { type: "boolean" },
    count: { type: "integer" },
    memo: { type: "object" },
  },
  required: ["to", "amount"],
};

describe("the arguments form", () => {
  it("has one field per schema property, typed, then the model's extra arguments", () => {
    const fields = fieldsOf(TRANSFER, { to: "bob", amount: 250, note: "x" });
    expect(fields.map((f) => [f.name, f.kind, f.required])).toEqual([
      ["to", "string", true],
      ["amount", "number", true],
      ["currency", "enum", false],
      ["urgent", "boolean", false],
      ["count", "integer", false],
      ["memo", "json", false],
      ["note", "json", false],
    ]);
    expect(fields[0]!.description).toBe("Who gets it");
    expect(fields[2]!.options).toEqual(["EUR", "USD"]);
  });

  it("starts from the model's arguments and reads them back unchanged", () => {
    const args = { to: "bob", amount: 250, memo: { a: 1 } };
    const fields = fieldsOf(TRANSFER, args);
    const draft = draftOf(fields, args);
    expect(draft).toMatchObject({ to: "bob", amount: "250", urgent: false, memo: '{"a":1}', currency: "" });
    const read = argumentsOf(fields, draft, args);
    expect(read.problems).toEqual([]);
    expect(sameArguments(read.arguments, args)).toBe(true);
  });

  it("converts edits to the schema's types and names each bad field", () => {
    const fields = fieldsOf(TRANSFER, {});
    const ok = argumentsOf(fields, { to: "carol", amount: "200.5", currency: "EUR", urgent: true, count: "3", memo: "" });
    expect(ok).toEqual({ arguments: { to: "carol", amount: 200.5, currency: "EUR", urgent: true, count: 3 }, problems: [] });
    const bad = argumentsOf(fields, { to: "", amount: "lots", count: "1.5", memo: "{" });
    expect(bad.problems).toEqual(["to: required", "amount: not a number", "count: not a whole number", "memo: not valid JSON"]);
  });

  it("a tool without a schema still shows the call's arguments", () => {
    const fields = fieldsOf(undefined, { path: "/tmp/x" });
    expect(fields).toEqual([{ name: "path", kind: "json", required: false, description: "", options: [] }]);
    expect(argumentsOf(fields, draftOf(fields, { path: "/tmp/x" })).arguments).toEqual({ path: "/tmp/x" });
  });
});

describe("the decision", () => {
  const approval = { arguments: { to: "bob", amount: 250 } };
  it("sends arguments only when edited and remember only when ticked", () => {
    expect(decisionBody(approval, { decision: "approve", arguments: { amount: 250, to: "bob" } })).toEqual({ decision: "approve" });
    expect(decisionBody(approval, { decision: "approve", arguments: { to: "bob", amount: 200 }, rememberSession: true })).toEqual({
      decision: "approve",
      arguments: { to: "bob", amount: 200 },
      remember: "session",
    });
    expect(decisionBody(approval, { decision: "reject", message: "  too much ", arguments: { x: 1 }, rememberSession: true })).toEqual({
      decision: "reject",
      message: "too much",
    });
  });

  it("says what a 409, a 422 and a 404 mean", () => {
    const decided = new ApiError(409, "409: already decided", "approval_decided", {
      detail: { message: "approval 'a' was already decided: rejected", approval: { status: "rejected", message: "no" } },
      error_code: "approval_decided",
    });
    expect(refusalOf(decided)).toMatchObject({ kind: "decided", message: "Decided elsewhere: rejected (reason: no)" });
    const invalid = new ApiError(422, "422 Invalid request: x", "validation_error", {
      detail: "edited arguments for 'transfer' do not fit its schema: amount: -5 is less than the minimum of 0",
    });
    expect(refusalOf(invalid)).toEqual({
      kind: "invalid",
      message: "Invalid edit: edited arguments for 'transfer' do not fit its schema: amount: -5 is less than the minimum of 0",
    });
    expect(refusalOf(new ApiError(404, "404 Not found: no approval 'x'")).kind).toBe("gone");
  });
});

describe("time left and the tool's schema", () => {
  it("counts down to expires_at", () => {
    expect(timeLeft(1000 + 86399, 1000_000)).toBe("23h 59m");
    expect(timeLeft(1000 + 245, 1000_000)).toBe("4m 05s");
    expect(timeLeft(1012, 1000_000)).toBe("12s");
    expect(timeLeft(1000, 1000_000)).toBe("expired");
  });

  it("finds the tool in the catalog", () => {
    const catalog = [{ agentId: "bank", tools: [{ name: "transfer", parameters: TRANSFER }] }];
    expect(toolOf(catalog, "bank", "transfer")?.parameters).toBe(TRANSFER);
    expect(toolOf(catalog, "bank", "nope")).toBeNull();
  });
});
