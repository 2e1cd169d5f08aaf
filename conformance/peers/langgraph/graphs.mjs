// Graphs the LangGraph peer serves (server.mjs). Each model call is
// scripted: a ScriptedChatModel streams fixed tokens and tool-call chunks,
// so every run of a graph sends the same events and nothing leaves the
// machine.
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessageChunk, AIMessage } from "@langchain/core/messages";
import { ChatGenerationChunk } from "@langchain/core/outputs";
import { tool } from "@langchain/core/tools";
import { StateGraph, MessagesAnnotation, START, END, interrupt } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

// ScriptedChatModel answers call n (the number of tool results in its
// input picks the turn) with turns[n]: text streamed token by token, then
// each tool call streamed in two chunks of its JSON arguments. failAfter
// throws after that many tokens of the turn.
class ScriptedChatModel extends BaseChatModel {
  constructor(turns, opts = {}) {
    super({});
    this.turns = turns;
    this.failAfter = opts.failAfter;
    this.delayMs = opts.delayMs ?? 0;
  }

  _llmType() {
    return "scripted";
  }

  bindTools() {
    return this;
  }

  async _generate(messages, options, runManager) {
    let full;
    for await (const c of this._streamResponseChunks(messages, options, runManager)) {
      full = full ? full.concat(c) : c;
    }
    const m = full.message;
    return { generations: [{ text: full.text, message: new AIMessage({ content: m.content, tool_calls: m.tool_calls, id: m.id }) }] };
  }

  async *_streamResponseChunks(messages, _options, runManager) {
    const turn = this.turns[Math.min(messages.filter((m) => m.getType() === "tool").length, this.turns.length - 1)];
    let sent = 0;
    for (const token of turn.tokens ?? []) {
      if (this.failAfter != null && sent === this.failAfter) {
        throw new Error("scripted model failure after " + sent + " tokens");
      }
      if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
      sent++;
      const chunk = new ChatGenerationChunk({ text: token, message: new AIMessageChunk({ content: token, id: turn.id }) });
      yield chunk;
      await runManager?.handleLLMNewToken(token, undefined, undefined, undefined, undefined, { chunk });
    }
    // A tool call's chunks carry its content-block index: after the text
    // block (index 0), as Anthropic's tool_use blocks.
    for (const [i, call] of (turn.calls ?? []).entries()) {
      const args = JSON.stringify(call.args);
      const cut = Math.floor(args.length / 2);
      for (const [k, part] of [args.slice(0, cut), args.slice(cut)].entries()) {
        const tcc = [{ index: i + 1, type: "tool_call_chunk", id: k === 0 ? call.id : undefined, name: k === 0 ? call.name : undefined, args: part }];
        const chunk = new ChatGenerationChunk({ text: "", message: new AIMessageChunk({ content: "", id: turn.id, tool_call_chunks: tcc }) });
        yield chunk;
        await runManager?.handleLLMNewToken("", undefined, undefined, undefined, undefined, { chunk });
      }
    }
  }
}

const multiply = tool(async ({ a, b }) => String(a * b), {
  name: "multiply",
  description: "Multiply two integers.",
  schema: z.object({ a: z.number(), b: z.number() }),
});

function reactGraph(turns) {
  const model = new ScriptedChatModel(turns);
  const callModel = async (state) => ({ messages: [await model.invoke(state.messages)] });
  const route = (state) => (state.messages.at(-1).tool_calls?.length ? "tools" : END);
  return new StateGraph(MessagesAnnotation)
    .addNode("model", callModel)
    .addNode("tools", new ToolNode([multiply]))
    .addEdge(START, "model")
    .addConditionalEdges("model", route, ["tools", END])
    .addEdge("tools", "model")
    .compile();
}

// react: text, one tool call streamed in chunks, the tool, a final answer.
export const react = reactGraph([
  { id: "msg-1", tokens: ["Let", " me", " multiply", "."], calls: [{ id: "call_1", name: "multiply", args: { a: 6, b: 7 } }] },
  { id: "msg-2", tokens: ["The", " answer", " is", " 42", "."] },
]);

// parallel: two tool calls in one message.
export const parallel = reactGraph([
  { id: "msg-p1", tokens: ["Two", " products", "."], calls: [
    { id: "call_a", name: "multiply", args: { a: 2, b: 3 } },
    { id: "call_b", name: "multiply", args: { a: 4, b: 5 } },
  ] },
  { id: "msg-p2", tokens: ["6", " and", " 20", "."] },
]);

// approval: asks a question (interrupt), then answers with the reply.
export const approval = new StateGraph(MessagesAnnotation)
  .addNode("ask", async () => {
    const reply = interrupt({ question: "Approve the transfer?" });
    return { messages: [new AIMessage({ id: "msg-answer", content: "You said: " + JSON.stringify(reply) })] };
  })
  .addEdge(START, "ask")
  .addEdge("ask", END)
  .compile();

// failing: streams two tokens, then the model call fails.
const failingModel = new ScriptedChatModel([{ id: "msg-f", tokens: ["Partial", " answer", " never", " ends"] }], { failAfter: 2 });
export const failing = new StateGraph(MessagesAnnotation)
  .addNode("model", async (state) => ({ messages: [await failingModel.invoke(state.messages)] }))
  .addEdge(START, "model")
  .addEdge("model", END)
  .compile();

// slow: a long stream (a token every 50 ms for about a minute) to cancel.
const slowModel = new ScriptedChatModel([{ id: "msg-s", tokens: Array.from({ length: 1200 }, (_, i) => `t${i} `) }], { delayMs: 50 });
export const slow = new StateGraph(MessagesAnnotation)
  .addNode("model", async (state) => ({ messages: [await slowModel.invoke(state.messages)] }))
  .addEdge(START, "model")
  .addEdge("model", END)
  .compile();

// nested: a subgraph node that itself calls the model.
const innerModel = new ScriptedChatModel([{ id: "msg-n", tokens: ["From", " the", " subgraph", "."] }]);
const inner = new StateGraph(MessagesAnnotation)
  .addNode("inner_model", async (state) => ({ messages: [await innerModel.invoke(state.messages)] }))
  .addEdge(START, "inner_model")
  .addEdge("inner_model", END)
  .compile();
export const nested = new StateGraph(MessagesAnnotation)
  .addNode("sub", inner)
  .addEdge(START, "sub")
  .addEdge("sub", END)
  .compile();
