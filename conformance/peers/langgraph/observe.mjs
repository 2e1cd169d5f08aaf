// Runs one scenario with @langchain/langgraph-sdk 1.15.0's ThreadStream
// against an agent-protocol server (LangGraph directly, or Interlingua in
// front of it) and prints what the SDK saw as one JSON line, for the Go
// test to compare the two.
//
//   node observe.mjs <api url> <sse|websocket> <assistant> <thread id> [resume JSON]
//
// With a resume value the run that interrupts is answered with it
// (input.respond) and the resumed run is observed too.
//
// The observation: per run, the messages the SDK assembled (thread.messages:
// each one's text, as its tokens came, and its tool calls), the lifecycle
// events (namespaces without their task ids), the interrupts, the root
// failure's error, the updates (node and payload), each message's run_id
// on its events, and the final values' messages (type, content, tool
// calls).
import { Client } from "@langchain/langgraph-sdk";
import WebSocket from "ws";

const [apiUrl, transport, assistantId, threadId, resume] = process.argv.slice(2);
const CHANNELS = ["values", "updates", "messages", "tools", "lifecycle", "input"];

const bare = (ns) => ns.map((s) => s.split(":")[0]);
const isRootTerminal = (ev) =>
  ev.method === "lifecycle" && ev.params.namespace.length === 0 && ["completed", "failed", "interrupted"].includes(ev.params.data.event);

function finalMessages(values) {
  return (values?.messages ?? []).map((m) => {
    const type = typeof m.getType === "function" ? m.getType() : m.type;
    const content = typeof m.content === "string" ? m.content : (m.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("");
    const calls = (m.tool_calls ?? []).map((c) => [c.id, c.name, c.args]);
    return { type, content, ...(calls.length ? { tool_calls: calls } : {}) };
  });
}

// observeRun starts (or resumes) a run and reads it to its root terminal
// event: the raw subscription and the messages projection, both opened
// before the command.
let lastSeq = 0;
async function observeRun(thread, start) {
  // Not awaited before the command: LangGraph parks a WebSocket
  // subscription made before the thread has a run until run.start.
  const subscribing = thread.subscribe({ channels: CHANNELS });
  const messages = thread.messages;
  if (transport === "sse") await subscribing;
  await start();
  const sub = await subscribing;
  const seen = [];
  const reading = (async () => {
    for await (const msg of messages) {
      const tokens = [];
      for await (const t of msg.text) tokens.push(t);
      seen.push({ text: tokens.join(""), calls: (await msg.toolCalls).map((c) => [c.id, c.name, c.args]) });
    }
  })();
  const events = [];
  for await (const ev of sub) {
    if (ev.seq <= lastSeq) continue; // an earlier run's, replayed
    events.push(ev);
    if (isRootTerminal(ev)) break;
  }
  lastSeq = Math.max(lastSeq, ...events.map((e) => e.seq));
  await Promise.race([reading, new Promise((r) => setTimeout(r, 2000))]);
  events.sort((a, b) => a.seq - b.seq);
  const lifecycle = events.filter((e) => e.method === "lifecycle").map((e) => [bare(e.params.namespace).join("/"), e.params.data.event]);
  const failed = events.find((e) => isRootTerminal(e) && e.params.data.event === "failed");
  const values = events.filter((e) => e.method === "values" && e.params.namespace.length === 0).at(-1)?.params.data;
  // Each message's run_id (the model call's LangChain run), as the data
  // of its messages events carry it: message id -> the run_ids seen.
  const runIds = new Map();
  const openMsg = new Map();
  for (const e of events.filter((e) => e.method === "messages")) {
    const ns = e.params.namespace.join("/");
    if (e.params.data.event === "message-start") openMsg.set(ns, e.params.data.id);
    const id = openMsg.get(ns) ?? null;
    if (!runIds.has(id)) runIds.set(id, new Set());
    runIds.get(id).add(e.params.data.run_id ?? null);
  }
  return {
    messages: seen,
    run_ids: [...runIds].map(([id, set]) => [id, [...set]]),
    lifecycle,
    updates: events.filter((e) => e.method === "updates").map((e) => [e.params.node ?? null, e.params.data]),
    tools: events.filter((e) => e.method === "tools").map((e) => [e.params.data.event, e.params.data.tool_call_id]),
    interrupts: events.filter((e) => e.method === "input.requested").map((e) => e.params.data.payload),
    error: failed ? failed.params.data.error : null,
    final: finalMessages(values),
  };
}

const client = new Client({ apiUrl });
const thread = client.threads.stream(threadId, {
  assistantId,
  transport,
  webSocketFactory: (u) => new WebSocket(u),
  maxReconnectAttempts: 0,
});
const out = { runs: [] };
try {
  out.runs.push(await observeRun(thread, () => thread.run.start({ input: { messages: [{ role: "user", content: "What is 6 * 7?" }] } })));
  if (resume !== undefined) {
    const [interrupt] = thread.interrupts;
    out.runs.push(await observeRun(thread, () =>
      thread.input.respond({ namespace: interrupt.namespace ?? [], interrupt_id: interrupt.interruptId, response: JSON.parse(resume) })));
  }
} catch (err) {
  out.failure = String(err?.code ?? "") + ": " + String(err?.message ?? err);
} finally {
  await thread.close();
}
console.log(JSON.stringify(out));
process.exit(0);
