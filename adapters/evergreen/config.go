package evergreen

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
	"github.com/interlingua-dev/interlingua/protocol"
)

// Limits bound one session's node store (section 3.4 of the reference).
// Zero fields mean their defaults; there is no unlimited setting.
type Limits struct {
	// MaxDepth bounds the nesting of nodes: the longest chain of child
	// edges below any node. Default 64.
	MaxDepth int `yaml:"max_depth"`
	// MaxNodes bounds the nodes a session holds (received, referenced but
	// not yet received, and produced), and the nodes one action's input
	// expands to when shared children are counted once per use.
	// Default 65,536.
	MaxNodes int `yaml:"max_nodes"`
	// MaxBytes bounds the payload bytes a session holds (data, refs, child
	// ids and fragments waiting for their predecessors), and the bytes one
	// action's input expands to. Default 256 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
}

const (
	defaultMaxDepth        = 64
	defaultMaxNodes        = 65536
	defaultMaxBytes        = 256 << 20
	defaultMaxMessageBytes = 4 << 20

	// compressMinBytes is the smallest message the gRPC/Connect frontend
	// and backend compress (when the peer accepts gzip): a per-token
	// message of a few dozen bytes does not shrink, while compressing it
	// costs a compressor reset (most of a session's CPU when every message
	// was compressed). Larger messages (prompts, whole outputs) still are.
	compressMinBytes = 1 << 10
)

func (l Limits) withDefaults() Limits {
	l.MaxDepth = cmp.Or(l.MaxDepth, defaultMaxDepth)
	l.MaxNodes = cmp.Or(l.MaxNodes, defaultMaxNodes)
	l.MaxBytes = cmp.Or(l.MaxBytes, defaultMaxBytes)
	return l
}

func (l Limits) validate(prefix string) []error {
	var errs []error
	if l.MaxDepth < 0 {
		errs = append(errs, fmt.Errorf("%smax_depth: must not be negative", prefix))
	}
	if l.MaxNodes < 0 {
		errs = append(errs, fmt.Errorf("%smax_nodes: must not be negative", prefix))
	}
	if l.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("%smax_bytes: must not be negative", prefix))
	}
	return errs
}

// FrontendConfig configures the Evergreen frontend (we serve StartSession).
// The yaml tags name the keys of a frontend options block.
type FrontendConfig struct {
	// Runner starts the runs of GENERATE actions. Required.
	Runner canonical.Runner `yaml:"-"`
	// Logger receives the frontend's records. Default discards.
	Logger *slog.Logger `yaml:"-"`
	// DefaultTarget is the target of an action whose target_spec.id is
	// empty. Default "default" (route a target of that name, with model:
	// to rename it for its backend).
	DefaultTarget string `yaml:"default_target"`
	// Limits bound each session's node store.
	Limits Limits `yaml:",inline"`
	// MaxMessageBytes bounds one received SessionMessage (gRPC/Connect
	// message or WebSocket frame). Default 4 MiB, grpc-go's default.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// MaxActions bounds the actions one session may send. Default 1,024.
	MaxActions int `yaml:"max_actions"`
	// MaxRunning bounds the actions of one session that run at once; ready
	// actions beyond it wait for a slot. Default 16.
	MaxRunning int `yaml:"max_running"`
	// MaxToolArgsBytes bounds the streamed arguments of one tool call held
	// until the call is rendered as a tool_calls chunk. Default 1 MiB.
	MaxToolArgsBytes int `yaml:"max_tool_args_bytes"`
	// ResponseTree renders every response as a non-leaf root with a child
	// per part, even when the answer is text only. By default a response
	// whose first part is text is one text leaf (the spec's shape).
	ResponseTree bool `yaml:"response_tree"`
	// FetchRefs lists the origins ("https://host" or "https://host:port")
	// whose http(s) refs the bridge fetches and passes on as inline data.
	// Refs from other origins are passed on as refs and never fetched.
	// Default none.
	FetchRefs []string `yaml:"fetch_refs"`
	// MaxRefBytes bounds one fetched ref. Default 16 MiB.
	MaxRefBytes int64 `yaml:"max_ref_bytes"`
	// RefTimeout bounds one ref fetch. Default 30s.
	RefTimeout time.Duration `yaml:"ref_timeout"`
	// RefClient fetches allowlisted refs. Default: a client that follows
	// no redirects.
	RefClient *http.Client `yaml:"-"`
	// Keys, when not empty, are the API keys a WebSocket client must give
	// in the ?key= query parameter (the actionengine-ts convention). Empty
	// accepts any key. gRPC and Connect clients are not asked for one.
	Keys []string `yaml:"keys"`
	// WebSocket configures the WebSocket connections (send queue, ping
	// interval, write timeout). Its MaxMessageBytes defaults to
	// MaxMessageBytes.
	WebSocket wsconn.Config `yaml:"-"`
	// CloseGrace bounds how long a session that ends waits for a write
	// blocked on a client that does not read. Default 5s.
	CloseGrace time.Duration `yaml:"close_grace"`
	// IdleTimeout aborts a session (DEADLINE_EXCEEDED) that runs no action
	// and receives no message for this long: its nodes are held until it
	// ends (reference section 3.1: a receiver may abort a session), and a
	// gRPC or Connect stream, unlike a WebSocket, has no ping that would
	// find a peer gone. Default 5m; negative: never.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

func (c FrontendConfig) withDefaults() FrontendConfig {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.DefaultTarget = cmp.Or(c.DefaultTarget, "default")
	c.Limits = c.Limits.withDefaults()
	c.MaxMessageBytes = cmp.Or(c.MaxMessageBytes, defaultMaxMessageBytes)
	c.MaxActions = cmp.Or(c.MaxActions, 1024)
	c.MaxRunning = cmp.Or(c.MaxRunning, 16)
	c.MaxToolArgsBytes = cmp.Or(c.MaxToolArgsBytes, 1<<20)
	c.MaxRefBytes = cmp.Or(c.MaxRefBytes, 16<<20)
	c.RefTimeout = cmp.Or(c.RefTimeout, 30*time.Second)
	if c.RefClient == nil {
		c.RefClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	}
	c.WebSocket.MaxMessageBytes = cmp.Or(c.WebSocket.MaxMessageBytes, int64(c.MaxMessageBytes))
	c.CloseGrace = cmp.Or(c.CloseGrace, 5*time.Second)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 5*time.Minute)
	return c
}

// Validate names every bad field.
func (c FrontendConfig) Validate() error {
	var errs []error
	if c.Runner == nil {
		errs = append(errs, errors.New("evergreen frontend: Runner is required"))
	}
	errs = append(errs, c.Limits.validate("evergreen frontend: ")...)
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxMessageBytes", int64(c.MaxMessageBytes)}, {"MaxActions", int64(c.MaxActions)},
		{"MaxRunning", int64(c.MaxRunning)}, {"MaxToolArgsBytes", int64(c.MaxToolArgsBytes)},
		{"MaxRefBytes", c.MaxRefBytes}, {"RefTimeout", int64(c.RefTimeout)}, {"CloseGrace", int64(c.CloseGrace)},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("evergreen frontend: %s must not be negative", f.name))
		}
	}
	for _, o := range c.FetchRefs {
		if _, err := parseOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("evergreen frontend: FetchRefs: %w", err))
		}
	}
	if err := c.WebSocket.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// parseOrigin checks an allowlisted origin: http or https, a host, nothing
// else.
func parseOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", fmt.Errorf("origin %q: %v", o, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("origin %q: scheme must be http or https (the bridge never reads %s refs)", o, u.Scheme)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("origin %q: want scheme://host[:port] only", o)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}

// Output names a GENERATE action defines (section 4 of the reference, plus
// Interlingua's optional outputs).
const (
	OutputResponse  = "response"
	OutputText      = "text"
	OutputReasoning = "reasoning"
	OutputToolCalls = "tool_calls"
)

// BackendConfig configures the Evergreen backend (we call an upstream
// Evergreen server). It is the backend's YAML options block.
type BackendConfig struct {
	// URL is the upstream's base URL: http:// for gRPC over h2c, https://
	// for TLS. Required.
	URL string `yaml:"url"`
	// Target is the target_spec.id sent upstream; empty sends the
	// request's target (after the route's model: renaming).
	Target string `yaml:"target"`
	// Protocol is grpc (default) or connect.
	Protocol string `yaml:"protocol"`
	// Outputs are the GENERATE outputs requested from the upstream:
	// response (always), and reasoning and tool_calls when listed (only an
	// upstream that defines them, such as another Interlingua, accepts
	// them). Default [response].
	Outputs []string `yaml:"outputs"`
	// Limits bound the node store that assembles the upstream's answer.
	Limits Limits `yaml:",inline"`
	// MaxMessageBytes bounds one received message. Default 4 MiB.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// FragmentBytes is the most payload one sent fragment carries; larger
	// leaves are split. Default 1 MiB.
	FragmentBytes int `yaml:"fragment_bytes"`
	// MaxToolChunkBytes bounds one tool_calls chunk from the upstream (it is
	// parsed whole). Default 1 MiB.
	MaxToolChunkBytes int `yaml:"max_tool_chunk_bytes"`

	// Logger receives the backend's records. Default discards.
	Logger *slog.Logger `yaml:"-"`
	// HTTPClient overrides the HTTP client (tests).
	HTTPClient connect.HTTPClient `yaml:"-"`
}

func (c BackendConfig) withDefaults() BackendConfig {
	c.Protocol = cmp.Or(c.Protocol, "grpc")
	if len(c.Outputs) == 0 {
		c.Outputs = []string{OutputResponse}
	}
	c.Limits = c.Limits.withDefaults()
	c.MaxMessageBytes = cmp.Or(c.MaxMessageBytes, defaultMaxMessageBytes)
	c.FragmentBytes = cmp.Or(c.FragmentBytes, 1<<20)
	c.MaxToolChunkBytes = cmp.Or(c.MaxToolChunkBytes, 1<<20)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate names every bad field.
func (c BackendConfig) Validate() error {
	var errs []error
	if _, err := protocol.UpstreamURL("url", c.URL, "http://host:port for h2c, https:// for TLS"); err != nil {
		errs = append(errs, err)
	}
	switch c.Protocol {
	case "", "grpc", "connect":
	default:
		errs = append(errs, fmt.Errorf("protocol: %q is not grpc or connect", c.Protocol))
	}
	seen := map[string]bool{}
	for _, o := range c.Outputs {
		switch o {
		case OutputResponse, OutputReasoning, OutputToolCalls:
		default:
			errs = append(errs, fmt.Errorf("outputs: %q is not response, reasoning or tool_calls", o))
		}
		if seen[o] {
			errs = append(errs, fmt.Errorf("outputs: %q listed twice", o))
		}
		seen[o] = true
	}
	errs = append(errs, c.Limits.validate("")...)
	if c.MaxMessageBytes < 0 {
		errs = append(errs, errors.New("max_message_bytes: must not be negative"))
	}
	if c.FragmentBytes < 0 {
		errs = append(errs, errors.New("fragment_bytes: must not be negative"))
	}
	if c.MaxToolChunkBytes < 0 {
		errs = append(errs, errors.New("max_tool_chunk_bytes: must not be negative"))
	}
	return errors.Join(errs...)
}
