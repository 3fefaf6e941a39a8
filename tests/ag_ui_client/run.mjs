// Drives the master's /ag-ui with the official AG-UI client (@ag-ui/client HttpAgent), as a
// front end would: a run that calls a tool, a run interrupted for an approval, and its resume.
// Run by tests/master/doors/test_agui_client.py:
//   node run.mjs <master base URL> <API key>
// Prints one JSON line: what each run did, as the client saw it.
import { HttpAgent } from "@ag-ui/client";

const [base, key] = process.argv.slice(2);
if (!base || !key) {
  console.error("usage: node run.mjs <master base URL> <API key>");
  process.exit(2);
}

const agent = new HttpAgent({ url: `${base}/ag-ui`, headers: { Authorization: `Bearer ${key}` } });

// One run: the events' types in order, the interrupts it ended with, the tool results it saw.
async function run(parameters) {
  const seen = { types: [], interrupts: [], results: [], errors: [], text: "" };
  const subscriber = {
    onEvent: ({ event }) => {
      seen.types.push(event.type);
    },
    onTextMessageContentEvent: ({ event }) => {
      seen.text += event.delta;
    },
    onToolCallResultEvent: ({ event }) => {
      seen.results.push({ toolCallId: event.toolCallId, content: event.content });
    },
    onRunFinishedEvent: (params) => {
      seen.outcome = params.outcome;
      if (params.outcome === "interrupt") seen.interrupts = params.interrupts;
    },
    onRunErrorEvent: ({ event }) => {
      seen.errors.push(event.message);
    },
  };
  await agent.runAgent(parameters, subscriber);
  return seen;
}

agent.addMessage({ id: "u1", role: "user", content: "What is my balance?" });
const balance = await run();

agent.addMessage({ id: "u2", role: "user", content: "Send 250 to bob." });
const held = await run();
const pending = agent.pendingInterrupts.map((interrupt) => interrupt.id);

// The front end answers every open interrupt: approve.
const resume = agent.pendingInterrupts.map((interrupt) => ({
  interruptId: interrupt.id,
  status: "resolved",
  payload: { approved: true },
}));
const resumed = await run({ resume });

console.log(
  JSON.stringify({
    threadId: agent.threadId,
    balance,
    held,
    pending,
    resumed,
    pendingAfter: agent.pendingInterrupts.length,
    state: agent.state,
    messages: agent.messages.map((message) => ({
      role: message.role,
      toolCalls: (message.toolCalls ?? []).map((call) => call.function.name),
      toolCallId: message.toolCallId,
    })),
  }),
);
