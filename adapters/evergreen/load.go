package evergreen

import (
	"context"
	"io"
	"log/slog"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/protocol"
)

// loadProfile is Evergreen's part in the load harness: the package's own
// gRPC backend as the client (gRPC framing is not worth re-implementing),
// the frontend in front of the harness's paced producer as the upstream
// (over h2c), and idle WebSocket sessions.
var loadProfile = &load.Load{
	Title:       "Evergreen gRPC",
	NewClient:   newLoadClient,
	NewUpstream: protocol.LoadUpstream(mountFrontend, map[string]any{"max_running": 1024}, true, func(base string) map[string]any { return map[string]any{"url": base} }),
	RatioDeltas: 10_000,
	Idle: &load.Idle{Transport: load.WebSocket, Text: "Evergreen WebSocket sessions", Open: func(ctx context.Context, addr string, _ int) (io.Closer, error) {
		return load.DialIdle(ctx, "ws://"+addr+"/evergreen/ws")
	}},
}

// loadPerConn streams share one client (one HTTP/2 connection).
const loadPerConn = 64

type loadClient struct {
	cs      load.ClientSpec
	clients []canonical.Backend
	params  map[string]*structpb.Value
}

func newLoadClient(cs load.ClientSpec) (load.Client, error) {
	c := &loadClient{cs: cs}
	// The backend pointed at the server, configured as the bridge would
	// configure it with only a url.
	opts, err := protocol.OptionsNode(map[string]any{"url": cs.Base})
	if err != nil {
		return nil, err
	}
	deps := protocol.BackendDeps{Log: slog.New(slog.DiscardHandler)}
	for i := 0; i < (cs.Streams+loadPerConn-1)/loadPerConn; i++ {
		b, err := newConfiguredBackend(&opts, deps)
		if err != nil {
			return nil, err
		}
		c.clients = append(c.clients, b)
	}
	if c.params, err = load.StructParams(cs.Params); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *loadClient) Stream(ctx context.Context, i int, prompt string, rec *load.Recorder) error {
	req := &canonical.Request{
		Target:     c.cs.Target,
		Inputs:     []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", prompt)}},
		Parameters: c.params,
	}
	rec.Begin()
	s, err := c.clients[i/loadPerConn].Start(ctx, req)
	if err != nil {
		return err
	}
	defer s.Close()
	return load.RecvDeltas(s, rec)
}

func (c *loadClient) Close() {}
