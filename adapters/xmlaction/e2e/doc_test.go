// Package e2e_test runs the XML action stream end to end: a whole
// Interlingua instance (bridgetest) with its embedded nats-server listening
// on loopback, tools served by a NATS micro service in a separate process
// (this test binary, started again), and real clients: net/http, curl, a
// connect-go Evergreen client over h2c, and @langchain/langgraph-sdk's
// ThreadStream (conformance/clients/agent/test/cortex.test.mjs, run by
// TestCortexAgentSDK).
package e2e_test
