// The SDK cases, defined once and run over each transport by
// test/sse.test.mjs and test/websocket.test.mjs.
//
// The scripted targets finish in microseconds, and the SDK pauses every
// projection one macrotask after a root terminal lifecycle event it
// receives on any subscription. So projections (messages, toolCalls,
// output) are opened, and their subscriptions settled with an awaited
// thread.subscribe, before run.start: on WebSocket each subscription is a
// separate command whose replay would otherwise arrive after another
// subscription's replay has already delivered the terminal event. Raw
// subscriptions receive events by filter matching, so a subscription opened
// while others are live sees live events before its own replay: collections
// below wait for the events they need, not for an order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ProtocolError } from "@langchain/langgraph-sdk";
import { collect, openThread, userMessage } from "./harness.mjs";

const ALL = ["values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks", "custom"];

const isRootTerminal = (ev) =>
  ev.method === "lifecycle" && ev.params.namespace.length === 0 && ["completed", "failed", "interrupted"].includes(ev.params.data.event);

/** eventsUntilTerminal reads a raw subscription until the n-th root terminal lifecycle event. */
async function eventsUntilTerminal(sub, n = 1) {
  return eventsUntil(sub, (events) => events.filter(isRootTerminal).length >= n);
}

/** eventsUntil reads a raw subscription until done(events) holds; events are returned sorted by seq. */
async function eventsUntil(sub, done) {
  const events = [];
  for await (const ev of sub) {
    events.push(ev);
    if (done(events)) break;
  }
  return events.sort((a, b) => a.seq - b.seq);
}

/** settle waits until every subscription opened so far is established on the server. */
async function settle(thread) {
  const barrier = await thread.subscribe({ channels: ["lifecycle"] });
  await barrier.unsubscribe();
}

function messageType(m) {
  return typeof m?.getType === "function" ? m.getType() : m?.type;
}

export function defineCases(transport) {
  test(`${transport}: run.start on demo-agent streams messages and tool events; thread.output resolves with the final values`, async () => {
    const { thread } = openThread(transport, "demo-agent");
    try {
      const messages = thread.messages;
      const toolCalls = thread.toolCalls;
      const output = thread.output;
      await settle(thread);
      const started = await thread.run.start({ input: userMessage("What is 6 * 7?") });
      assert.match(started.run_id, /^run-/);
      assert.equal(typeof thread.ordering.lastAppliedThroughSeq, "number");

      const seen = [];
      for await (const msg of messages) {
        let text = "";
        for await (const token of msg.text) text += token;
        seen.push({ text, reasoning: await msg.reasoning, calls: await msg.toolCalls, usage: await msg.usage });
      }
      assert.equal(seen.length, 2, "two AI messages");
      assert.equal(seen[0].reasoning, "I should compute 6 * 7 with the calculator.");
      assert.deepEqual(seen[0].calls.map((c) => [c.type, c.id, c.name, c.args]), [["tool_call", "call-1", "calculator", { expression: "6 * 7" }]]);
      assert.equal(seen[1].text, "6 * 7 = 42.");
      assert.equal(seen[1].usage.output_tokens, 5);

      const calls = new Map();
      for await (const tc of toolCalls) calls.set(tc.callId, tc);
      assert.deepEqual([...calls.keys()], ["call-1"]);
      const tc = calls.get("call-1");
      assert.equal(tc.name, "calculator");
      assert.deepEqual(tc.input, { expression: "6 * 7" });
      assert.deepEqual(await tc.output, { result: 42 });

      const final = await output;
      assert.deepEqual(final.messages.map(messageType), ["human", "ai", "tool", "ai"]);
      assert.equal(final.messages[0].content, "What is 6 * 7?");
      assert.equal(final.messages[3].content, "6 * 7 = 42.");
      assert.equal(thread.interrupted, false);
    } finally {
      await thread.close();
    }
  });

  test(`${transport}: an interrupt is answered with input.respond and the run resumes`, async () => {
    const { thread } = openThread(transport, "demo-approval");
    try {
      const output = thread.output;
      await settle(thread);
      await thread.run.start({ input: userMessage("What is 6 * 7?") });
      const atInterrupt = await output;
      assert.equal(thread.interrupted, true);
      assert.equal(thread.interrupts.length, 1);
      const [interrupt] = thread.interrupts;
      assert.match(interrupt.interruptId, /^approve-run-/);
      assert.deepEqual(interrupt.namespace, []);
      assert.equal(interrupt.payload.question, "Approve the calculator call?");
      assert.deepEqual(atInterrupt.messages.map(messageType), ["human", "ai"]);

      // Answering an interrupt that does not exist is the protocol's error.
      await assert.rejects(
        thread.input.respond({ namespace: [], interrupt_id: "no-such-interrupt", response: { approved: true } }),
        (err) => err instanceof ProtocolError && err.code === "no_such_interrupt",
      );

      // Subscribe before answering: a subscription opened while the resumed
      // run ends could be paused (at that run's terminal event) before its
      // own replay arrives.
      const sub = await thread.subscribe({ channels: ["lifecycle", "input", "values"] });
      await thread.input.respond({ namespace: [], interrupt_id: interrupt.interruptId, response: { approved: true } });
      const events = await eventsUntil(
        sub,
        (evs) => evs.some((e) => e.method === "input.answered") && evs.filter(isRootTerminal).length === 2,
      );
      const answered = events.filter((e) => e.method === "input.answered");
      assert.deepEqual(answered.map((e) => e.params.data.interrupt_ids), [[interrupt.interruptId]]);
      const terminals = events.filter(isRootTerminal).map((e) => e.params.data.event);
      assert.deepEqual(terminals, ["interrupted", "completed"]);
      const lastValues = events.filter((e) => e.method === "values").at(-1).params.data;
      assert.equal(lastValues.messages.at(-1).content, "6 * 7 = 42.");

      const state = await thread.state.get({ namespace: [] });
      assert.equal(state.values.messages.at(-1).content, "6 * 7 = 42.");
      assert.match(state.checkpoint.id, /^ckpt-/);
    } finally {
      await thread.close();
    }
  });

  test(`${transport}: a dropped connection is resumed with no duplicate and no missing event`, async () => {
    const { thread, state } = openThread(transport, "stream", { drop: { afterEvents: 60 } });
    try {
      const sub = await thread.subscribe({ channels: ALL });
      await thread.run.start({ input: userMessage("go"), config: { configurable: { deltas: 200, delay_ms: 2 } } });
      const events = await eventsUntil(sub, (evs) => {
        const terminal = evs.find(isRootTerminal);
        return terminal !== undefined && evs.length >= terminal.seq;
      });
      assert.ok(state.dropped, "the connection was dropped");
      const seqs = events.map((e) => e.seq);
      const last = seqs.at(-1);
      assert.ok(isRootTerminal(events.at(-1)), "the run's terminal event has the highest seq");
      assert.deepEqual(seqs, Array.from({ length: last }, (_, i) => i + 1), "every seq 1..last exactly once");
      assert.deepEqual(events.map((e) => e.event_id), seqs.map(String));
      const text = events
        .filter((e) => e.method === "messages" && e.params.data.event === "content-block-delta")
        .map((e) => e.params.data.delta.text)
        .join("");
      assert.equal(text, "tok ".repeat(200));
    } finally {
      await thread.close();
    }
  });

  test(`${transport}: state commands: listCheckpoints, fork from a checkpoint, getTree`, async () => {
    const { thread, threadId } = openThread(transport, "echo");
    try {
      const sub = await thread.subscribe({ channels: ["lifecycle", "checkpoints"] });
      await settle(thread);
      await thread.run.start({ input: userMessage("one two") });
      await eventsUntilTerminal(sub);
      const { checkpoints } = await thread.state.listCheckpoints({ namespace: [] });
      assert.equal(checkpoints.length, 2, "input and model checkpoints");
      const input = checkpoints.at(-1);
      assert.equal(input.metadata.source, "input");
      const tree = await thread.agent.getTree({});
      assert.deepEqual(tree.tree, { namespace: [], status: "completed", graph_name: "echo" });

      const sub2 = await thread.subscribe({ channels: ["lifecycle"] });
      const forked = await thread.state.fork({ checkpoint_id: input.id });
      assert.equal(forked.thread_id, threadId);
      assert.match(forked.run_id, /^run-/);
      await eventsUntilTerminal(sub2, 2);
      const state = await thread.state.get({ namespace: [] });
      assert.deepEqual(state.values.messages.map((m) => [m.type, m.content]), [["human", "one two"], ["ai", "one two"]]);
      const after = await thread.state.listCheckpoints({ namespace: [], limit: 2 });
      assert.deepEqual(after.checkpoints.map((c) => c.metadata.source), ["loop", "fork"]);

      await assert.rejects(thread.state.fork({ checkpoint_id: "ckpt-404" }), (err) => err instanceof ProtocolError && err.code === "no_such_checkpoint");
    } finally {
      await thread.close();
    }
  });
}
