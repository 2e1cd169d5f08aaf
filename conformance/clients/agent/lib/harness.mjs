// Harness for the SDK suite: the server URL, and fetch / WebSocket wrappers
// that record every payload the server sends (command responses, SSE event
// frames, WebSocket frames) into $CAPTURE_DIR for the schema type-check, and
// can cut a connection once to exercise the SDK's resume.
import { appendFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import WebSocket from "ws";

export const apiUrl = process.env.INTERLINGUA_URL;
if (!apiUrl) throw new Error("INTERLINGUA_URL is not set (the base URL of an Interlingua instance)");

const captureDir = process.env.CAPTURE_DIR;
const captureFile = captureDir ? join(captureDir, `capture-${process.pid}.jsonl`) : null;
if (captureDir) mkdirSync(captureDir, { recursive: true });

/** record stores one server payload: kind "event", "response" (with the command's method) or "error". */
export function record(kind, payload, method) {
  if (!captureFile) return;
  appendFileSync(captureFile, JSON.stringify({ kind, method, payload }) + "\n");
}

function recordFrame(payload, methods) {
  if (payload?.type === "event") record("event", payload);
  else if (payload?.type === "success") record("response", payload, methods.get(payload.id));
  else if (payload?.type === "error") record("error", payload, methods.get(payload.id));
}

/**
 * sseFrames splits SSE text into the data payloads of complete events;
 * returns [payloads, rest].
 */
function sseFrames(text) {
  const out = [];
  const blocks = text.split(/\r\n\r\n|\n\n|\r\r/);
  const rest = blocks.pop();
  for (const block of blocks) {
    const data = block.split(/\r\n|\n|\r/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
    if (data.length) out.push(data.join("\n"));
  }
  return [out, rest];
}

/**
 * capturingFetch wraps fetch: it records command responses and SSE frames.
 * With drop: {afterEvents: n}, the first stream to deliver n events is cut
 * (its body errors) once, as a dropped connection would.
 */
export function capturingFetch(drop) {
  const methods = new Map();
  const state = { dropped: false };
  const fetchImpl = async (url, init) => {
    let sentMethod;
    if (String(url).endsWith("/commands") && typeof init?.body === "string") {
      try {
        const cmd = JSON.parse(init.body);
        sentMethod = cmd.method;
        methods.set(cmd.id, cmd.method);
      } catch {}
    }
    const res = await fetch(url, init);
    const type = res.headers.get("content-type") ?? "";
    if (type.startsWith("application/json")) {
      const text = await res.text();
      try {
        const payload = JSON.parse(text);
        if (payload?.type) recordFrame(payload, methods);
      } catch {}
      return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    if (!type.startsWith("text/event-stream") || !res.body) return res;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let pending = "";
    let seen = 0;
    const body = new ReadableStream({
      async pull(controller) {
        let chunk;
        try {
          chunk = await reader.read();
        } catch (err) {
          controller.error(err);
          return;
        }
        if (chunk.done) {
          controller.close();
          return;
        }
        pending += decoder.decode(chunk.value, { stream: true });
        const [frames, rest] = sseFrames(pending);
        pending = rest;
        for (const f of frames) {
          try {
            recordFrame(JSON.parse(f), methods);
          } catch {}
        }
        seen += frames.length;
        controller.enqueue(chunk.value);
        if (drop && !state.dropped && seen >= drop.afterEvents) {
          state.dropped = true;
          reader.cancel().catch(() => {});
          controller.error(new Error("test: connection dropped"));
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return { fetch: fetchImpl, state };
}

/**
 * capturingWebSocketFactory records every frame the server sends; with
 * drop: {afterEvents: n} it terminates the first socket to receive n events
 * (an abrupt close, code 1006), once.
 */
export function capturingWebSocketFactory(drop) {
  const methods = new Map();
  const state = { dropped: false, sockets: 0 };
  const factory = (url) => {
    const ws = new WebSocket(url);
    state.sockets++;
    const send = ws.send.bind(ws);
    ws.send = (data, ...rest) => {
      try {
        const cmd = JSON.parse(String(data));
        methods.set(cmd.id, cmd.method);
      } catch {}
      return send(data, ...rest);
    };
    let events = 0;
    ws.on("message", (data) => {
      let payload;
      try {
        payload = JSON.parse(String(data));
      } catch {
        return;
      }
      recordFrame(payload, methods);
      if (payload?.type === "event") events++;
      if (drop && !state.dropped && events >= drop.afterEvents) {
        state.dropped = true;
        ws.terminate();
      }
    });
    return ws;
  };
  return { factory, state };
}

/** openThread returns a ThreadStream on a fresh thread over transport ("sse" or "websocket"). */
export function openThread(transport, assistantId, { drop, threadId } = {}) {
  const client = new Client({ apiUrl });
  const id = threadId ?? `sdk-${transport}-${assistantId}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  const common = { assistantId, transport, reconnectDelayMs: () => 20, maxReconnectAttempts: 3 };
  if (transport === "websocket") {
    const ws = capturingWebSocketFactory(drop);
    return { thread: client.threads.stream(id, { ...common, webSocketFactory: ws.factory }), state: ws.state, threadId: id };
  }
  const f = capturingFetch(drop);
  return { thread: client.threads.stream(id, { ...common, fetch: f.fetch, streamIdleReconnect: 0 }), state: f.state, threadId: id };
}

/** userMessage is run.start input with one user message. */
export const userMessage = (content) => ({ messages: [{ role: "user", content }] });

/** collect drains an async iterable into an array. */
export async function collect(iterable) {
  const out = [];
  for await (const x of iterable) out.push(x);
  return out;
}
