// The Cortex complete example through the agent protocol: the scripted
// target cortex-example, routed with the XML action decoder on (xml: true),
// its five tools served by a NATS micro service. Only
// adapters/xmlaction/e2e TestCortexAgentSDK sets that instance up, so this
// file is skipped unless INTERLINGUA_CORTEX=1 (the plain `node --test test/`
// of adapters/agent TestSDK skips it).
//
// The tool service makes the order deterministic: the three fetches answer
// only once all three are in flight, and the cache write (fire_and_forget)
// is held until the Go test releases it after this file has finished. So
// the assertions below are about order, never about time.
//
// Environment: INTERLINGUA_URL (the instance), INTERLINGUA_CORTEX=1,
// INTERLINGUA_CORTEX_TRANSPORT (sse, the default, or websocket),
// INTERLINGUA_CORTEX_OUT (a file to write the summary to, read by the Go
// test), CAPTURE_DIR (payload capture for the type-check, optional).
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";

const enabled = process.env.INTERLINGUA_CORTEX === "1";
const transport = process.env.INTERLINGUA_CORTEX_TRANSPORT || "sse";
const FETCHES = ["wiki", "arxiv", "news"];

const isRootTerminal = (ev) =>
  ev.method === "lifecycle" && ev.params.namespace.length === 0 && ["completed", "failed", "interrupted"].includes(ev.params.data.event);

/** settle waits until every subscription opened so far is established on the server. */
async function settle(thread) {
  const barrier = await thread.subscribe({ channels: ["lifecycle"] });
  await barrier.unsubscribe();
}

/** outcome is a tool call's output as the SDK resolved it by now: {output}, {error} or {pending: true}. */
function outcome(tc) {
  return Promise.race([
    tc.output.then(
      (output) => ({ output }),
      (err) => ({ error: String(err?.message ?? err) }),
    ),
    // A macrotask: an output already resolved wins the race.
    new Promise((resolve) => setImmediate(() => resolve({ pending: true }))),
  ]);
}

/**
 * summarize turns the root events of one run (sorted by seq) into what the
 * Go test checks: the tool events and block finishes in order, the
 * reasoning and response text, and the terminal status.
 */
function summarize(events) {
  const timeline = [];
  let reasoning = "";
  let response = "";
  const calls = [];
  for (const ev of events) {
    if (ev.params.namespace.length !== 0) continue;
    const d = ev.params.data;
    if (ev.method === "tools") {
      timeline.push({ seq: ev.seq, event: d.event, id: d.tool_call_id, name: d.tool_name, input: d.input, output: d.output, message: d.message });
    } else if (ev.method === "messages" && d.event === "content-block-finish") {
      const b = d.content ?? {};
      timeline.push({ seq: ev.seq, event: `block-finish ${b.type}`, id: b.id });
      if (b.type === "reasoning") reasoning += b.reasoning ?? "";
      else if (b.type === "text") response += b.text ?? "";
      else if (b.type === "tool_call") calls.push({ id: b.id, name: b.name, args: b.args });
    } else if (ev.method === "messages" && d.event === "content-block-delta") {
      // Streaming: the text arrives as deltas before each block finishes.
      if (d.delta?.type === "text-delta") timeline.push({ seq: ev.seq, event: "text-delta" });
    } else if (isRootTerminal(ev)) {
      timeline.push({ seq: ev.seq, event: `lifecycle ${d.event}` });
    }
  }
  // Consecutive text deltas are one entry: the order, not the count, matters.
  const compact = timeline.filter((e, i) => e.event !== "text-delta" || timeline[i - 1]?.event !== "text-delta");
  return { timeline: compact, reasoning, response, calls, terminal: events.filter(isRootTerminal).map((e) => e.params.data.event) };
}

test(
  `${transport}: cortex-example through the XML action decoder: fetches overlap, the analyzer waits for them, the cache write never delays the response`,
  { skip: enabled ? false : "set INTERLINGUA_CORTEX=1 (adapters/xmlaction/e2e TestCortexAgentSDK serves the tools this needs)" },
  async () => {
    const { openThread, userMessage } = await import("../lib/harness.mjs");
    const { thread, threadId } = openThread(transport, "cortex-example");
    try {
      // Everything is subscribed before run.start: the run is fast.
      const messages = thread.messages;
      const toolCalls = thread.toolCalls;
      const sub = await thread.subscribe({ channels: ["messages", "tools", "lifecycle"] });
      await settle(thread);
      await thread.run.start({ input: userMessage("Research the state of AI") });

      const events = [];
      for await (const ev of sub) {
        events.push(ev);
        if (isRootTerminal(ev)) break;
      }
      events.sort((a, b) => a.seq - b.seq);
      const summary = summarize(events);

      // The SDK's own projections of the same run.
      const sdkMessages = [];
      for await (const msg of messages) {
        let text = "";
        for await (const token of msg.text) text += token;
        const calls = (await msg.toolCalls) ?? [];
        sdkMessages.push({ text, reasoning: await msg.reasoning, toolCalls: calls.map((c) => ({ id: c.id, name: c.name, args: c.args })) });
      }
      // The projection yields a call's handle when it starts and again
      // when it ends: one entry per call id, in order of start.
      const handles = new Map();
      for await (const tc of toolCalls) if (!handles.has(tc.callId)) handles.set(tc.callId, tc);
      const sdkToolCalls = [];
      for (const tc of handles.values()) sdkToolCalls.push({ callId: tc.callId, name: tc.name, input: tc.input, ...(await outcome(tc)) });
      summary.transport = transport;
      summary.threadId = threadId;
      summary.sdk = { messages: sdkMessages, toolCalls: sdkToolCalls };
      if (process.env.INTERLINGUA_CORTEX_OUT) writeFileSync(process.env.INTERLINGUA_CORTEX_OUT, JSON.stringify(summary, null, 2));

      // The order, from the events' seq (the Go test checks the same
      // summary with the fixture's exact values).
      const at = (event, id) => summary.timeline.findIndex((e) => e.event === event && e.id === id);
      assert.deepEqual(summary.terminal, ["completed"]);
      const finishes = FETCHES.map((id) => at("tool-finished", id));
      assert.ok(finishes.every((i) => i >= 0), `every fetch finished: ${JSON.stringify(summary.timeline)}`);
      for (const id of FETCHES) assert.ok(at("tool-started", id) >= 0 && at("tool-started", id) < Math.min(...finishes), `fetch ${id} started before any fetch finished`);
      assert.ok(at("tool-started", "analyze") > Math.max(...finishes), "the analyzer started after all three fetches finished");
      const analysis = summary.timeline[at("tool-finished", "analyze")]?.output;
      assert.equal(typeof analysis, "string");
      assert.ok(at("tool-started", "cache") >= 0, "the cache write started");
      assert.equal(at("tool-finished", "cache"), -1, "the run did not wait for the cache write");
      assert.equal(at("tool-error", "cache"), -1);
      assert.ok(summary.response.includes(analysis) && !summary.response.includes("$comprehensive_analysis"), summary.response);
      assert.equal(sdkMessages.map((m) => m.text).join(""), summary.response);
    } finally {
      await thread.close();
    }
  },
);
