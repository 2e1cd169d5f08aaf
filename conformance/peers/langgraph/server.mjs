// A real LangGraph server (@langchain/langgraph-api's startServer) serving
// the scripted graphs of graphs.mjs on 127.0.0.1, for adapters/agent's
// langgraph_* tests.
//
//   node server.mjs <data dir>
//
// It listens on a port the system picks and prints one line,
// "listening http://127.0.0.1:<port>", when it serves. Its state (the
// ops file, checkpoints) goes in <data dir>. Nothing reaches the network:
// tracing is off and no LangSmith key is passed on.
import path from "node:path";
import url from "node:url";

for (const k of Object.keys(process.env)) {
  if (/^(LANGSMITH|LANGCHAIN)_/.test(k)) delete process.env[k];
}
process.env.LANGSMITH_TRACING = "false";
process.env.LANGCHAIN_TRACING_V2 = "false";
process.env.LOG_LEVEL ??= "error";

const { startServer } = await import("@langchain/langgraph-api/server");

const dir = path.dirname(url.fileURLToPath(import.meta.url));
const cwd = process.argv[2];
if (!cwd) {
  console.error("usage: node server.mjs <data dir>");
  process.exit(2);
}
const graphs = Object.fromEntries(
  ["react", "parallel", "approval", "failing", "slow", "nested"].map((g) => [g, path.join(dir, "graphs.mjs") + ":" + g]),
);
const { host } = await startServer({ port: 0, nWorkers: 4, host: "127.0.0.1", cwd, graphs });
console.log("listening http://" + host);
// The Go test ends the process by closing stdin (or killing it).
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
