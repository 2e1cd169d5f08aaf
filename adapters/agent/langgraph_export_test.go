package agent

// UpstreamThread is the upstream's id for a thread (upstreamThread), for
// the external LangGraph tests.
var UpstreamThread = upstreamThread
