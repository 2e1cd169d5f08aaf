// Package leaktest holds the goroutines the test mains tell goleak to
// ignore: those a library leaves behind through a fault of its own, which
// no code of ours can avoid. Each names the library's version and why.
package leaktest

import "go.uber.org/goleak"

// natsAsyncReplyReset is the goroutine nats.go's JetStream starts for the
// first asynchronous publish of a context (newAsyncReply). Its first step
// takes the publisher's lock to read the status channel; when the context
// is cleaned up first (cleanupReplySub, which ObjectStore.Put defers,
// nats.go v1.55.0 jetstream/object.go) the channel it reads is nil, and it
// waits on it for ever (jetstream/publish.go, resetPendingAcksOnReconnect).
// The thread store puts its large values in an object store, so a busy
// machine can strand one per large put.
const natsAsyncReplyReset = "github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"

// Upstream are the options for goleak.VerifyTestMain in the packages that
// start a bridge's fabric.
var Upstream = []goleak.Option{goleak.IgnoreTopFunction(natsAsyncReplyReset)}
