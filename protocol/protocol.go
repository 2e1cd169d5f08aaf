// Package protocol is the shape of a wire protocol as the rest of the
// program sees it: each adapter exports one Protocol value (its name, its
// frontend, its backend factory, its refusal form), and the list in package
// protocols is the only place outside an adapter's folder that names one.
// The model is connect-go's protocol values: what differs per protocol is
// data, not a switch on its name.
//
// The package imports no adapter and not the bridge, so both can import it.
package protocol

import (
	"context"
	"errors"

	"log/slog"
	"net/http"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/metrics"
)

// Protocol is one adapter's contribution to the program. Fields a protocol
// has no use for stay nil.
type Protocol struct {
	// Name is the protocol's name: the frontends.<name> config block, the
	// backends' type, the conformance matrix's row and column.
	Name string
	// Paths are the URL path prefixes the frontend serves; a request under
	// one (the longest that matches) is this protocol's, for refusals.
	Paths []string
	// ContentTypes are Content-Type prefixes that make a request this
	// protocol's on any path (gRPC and Connect framing), checked before
	// Paths.
	ContentTypes []string
	// Mount registers the frontend's handlers; nil: no frontend.
	Mount func(mux *http.ServeMux, d FrontendDeps) error
	// FrontendOptions returns a pointer to the type Mount decodes its
	// frontends.<name> block into (FrontendDeps.Options), so the config
	// is checked against it when it is read, with the file's lines; nil:
	// the frontend takes no options and a block for it is refused.
	FrontendOptions func() any
	// NewBackend builds a backend of this type from its config options;
	// nil: no backend.
	NewBackend BackendFactory
	// NewRuntime builds the protocol's runtime (canonical.Runtime), which
	// the bridge runs around the backend of each request naming the
	// protocol in Request.Runtime; nil: none.
	NewRuntime func(d RuntimeDeps) canonical.Runtime
	// WrapRoute wraps the backend of a route with xml: true (the XML
	// action-stream decoder); nil for every other protocol.
	WrapRoute func(be canonical.Backend, d BackendDeps) canonical.Backend
	// WriteRefusal answers, in the protocol's own error form, a request the
	// server refuses before the frontend sees it (401, 403, 415); nil:
	// WriteCanonicalRefusal.
	WriteRefusal func(w http.ResponseWriter, r *http.Request, ref Refusal)
	// Client returns a client of the frontend that reads what it writes
	// back as canonical events, for the conformance runner and the bench
	// harness; nil: none. Where the backend is a client of the protocol, it
	// is the client. One with a Close method is closed after use.
	Client func(c ClientConfig) (canonical.Backend, error)
	// Conformance is what the protocol's wire keeps of a run, with the
	// stated degradations, for the conformance runner; nil: not in the
	// matrix.
	Conformance *profile.Profile
	// Load is the protocol's part in the load harness (bench): its
	// frontend's load client, its reference upstream, its idle
	// connections; nil: none.
	Load *load.Load
}

// ClientConfig points a protocol's client at a server.
type ClientConfig struct {
	// Base is the server's URL (http://host:port).
	Base string
	// Target is the bridge target, for protocols that name it in the URL
	// or the session rather than in each request.
	Target string
	// HTTPClient carries the client's HTTP requests (a protocol over
	// gRPC needs one speaking HTTP/2); it adds Headers to each.
	HTTPClient *http.Client
	// Headers are sent with every request (credentials of a server under
	// test); a client that does not dial through HTTPClient (a WebSocket
	// dialer) sends them itself.
	Headers http.Header
}

// Refusal is a request refused before any frontend saw it.
type Refusal struct {
	Status  int
	Code    canonical.Code
	Message string
}

// BackendFactory builds a backend from its config options.
type BackendFactory func(opts *yaml.Node, deps BackendDeps) (canonical.Backend, error)

// BackendDeps is what a backend constructor may use.
type BackendDeps struct {
	Log    *slog.Logger
	Tools  canonical.Tools
	Runner canonical.Runner
}

// RuntimeDeps is what a runtime constructor may use.
type RuntimeDeps struct {
	Log *slog.Logger
	// Store holds the thread state the runtime keeps, shared by the
	// instances.
	Store canonical.ThreadStore
}

// FrontendDeps is what a frontend may use.
type FrontendDeps struct {
	Log    *slog.Logger
	Runner canonical.Runner
	// Observer serves a thread's events on any instance, from the replay
	// log then live (agent-protocol subscribers, reconnects).
	Observer canonical.Observer
	// CheckThread claims a thread for the caller's API key, or refuses
	// (not found) another key's thread; frontends that keep thread state
	// of their own call it before serving a thread.
	CheckThread func(ctx context.Context, thread string) error
	// CancelThread cancels a thread's runs on whichever instance runs
	// them (each ends cancelled); the caller has checked the thread is
	// the caller's.
	CancelThread func(thread string)
	// CancelRun cancels one run of a thread wherever it runs; the caller
	// has checked the thread is the caller's.
	CancelRun func(thread, run string)
	Tools     canonical.Tools
	// Store is the bridge's thread store, shared by the instances; nil in
	// servers without a fabric.
	Store canonical.ThreadStore
	// Ready reports whether the instance takes new runs (not draining,
	// its NATS connection up), for readiness endpoints of the protocol's.
	Ready func() bool
	// OnShutdown registers a function called when shutdown begins (e.g. to
	// close idle WebSockets with 1001); see http.Server.RegisterOnShutdown.
	OnShutdown func(func())
	// Options is the frontend's block under frontends.<name> in the config
	// (nil when absent), for DecodeOptions.
	Options *yaml.Node
	// OnClose registers a function called after runs have drained, which
	// the server waits for (bounded) before it exits: hijacked connections
	// flush their last frames and close there.
	OnClose func(func())
	// Metrics are the server's; a frontend that counts protocol events
	// (slow-consumer cut-offs) takes its counters from here.
	Metrics *metrics.Metrics
}

// DecodeOptions decodes an options node into an adapter's Config. Unknown
// keys (with the closest known one), durations without a unit and values
// of the wrong kind are refused with their line in the config file
// (CheckNode), not a line counted from the block's start.
func DecodeOptions(opts *yaml.Node, into any) error {
	if opts == nil || opts.Kind == 0 {
		return nil
	}
	if errs := CheckNode(opts, reflect.TypeOf(into), ""); len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := opts.Decode(into); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

// WriteCanonicalRefusal writes the canonical error form,
// {"code": name, "message": msg}, with a Bearer challenge on a 401.
func WriteCanonicalRefusal(w http.ResponseWriter, _ *http.Request, ref Refusal) {
	WriteJSONRefusal(w, ref, map[string]string{"code": ref.Code.String(), "message": ref.Message})
}

// WriteJSONRefusal writes body as an HTTP API's JSON error, with a Bearer
// challenge (WWW-Authenticate) when the request lacked a valid key.
func WriteJSONRefusal(w http.ResponseWriter, ref Refusal, body any) {
	if ref.Code == canonical.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="interlingua"`)
	}
	WriteJSON(w, ref.Status, body)
}

// WriteJSON writes v as a JSON response with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if b, err := json.Marshal(v, refusalJSON); err == nil {
		_, _ = w.Write(append(b, '\n')) // one line, as encoding/json's Encoder wrote it
	}
}

// refusalJSON writes the protocols' error bodies (maps) as encoding/json
// did: keys sorted, <, >, &, U+2028 and U+2029 escaped, and invalid UTF-8 in
// a message replaced by U+FFFD, not refused (the body would be lost; v1
// wrote the replacement as \ufffd, this as the character).
var refusalJSON = json.JoinOptions(json.Deterministic(true), json.EscapeForHTML(true), json.EscapeForJS(true),
	json.AllowInvalidUTF8(true))

// For returns the protocol whose ContentTypes or longest Paths prefix claim
// r, or nil.
func For(all []Protocol, r *http.Request) *Protocol {
	ct := r.Header.Get("Content-Type")
	for i := range all {
		for _, c := range all[i].ContentTypes {
			if strings.HasPrefix(ct, c) {
				return &all[i]
			}
		}
	}
	var best *Protocol
	longest := 0
	for i := range all {
		for _, p := range all[i].Paths {
			if len(p) > longest && strings.HasPrefix(r.URL.Path, p) {
				best, longest = &all[i], len(p)
			}
		}
	}
	return best
}
