package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/bridge"
)

// Instance is an in-process Interlingua server on a loopback port with
// its embedded NATS in a temporary folder.
type Instance struct {
	*bridge.Server
	// URL is the base URL, http://127.0.0.1:port.
	URL    string
	cancel context.CancelFunc
	done   chan error
	dir    string
}

// StartInstance starts a server with cfg (Listen, DataDir and
// ShutdownTimeout are filled when empty) and waits until it is ready.
func StartInstance(ctx context.Context, cfg bridge.Config, log *slog.Logger) (*Instance, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	dir := ""
	if cfg.DataDir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "interlingua-bench-"); err != nil {
			return nil, err
		}
		cfg.DataDir = dir
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 2 * time.Second
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	srv, err := bridge.NewServer(ctx, cfg, log)
	if err != nil {
		cancel()
		os.RemoveAll(dir)
		return nil, err
	}
	inst := &Instance{Server: srv, URL: "http://" + srv.Addr(), cancel: cancel, done: make(chan error, 1), dir: dir}
	go inst.serve(ctx)
	if err := waitReady(ctx, inst.URL); err != nil {
		inst.Close()
		return nil, err
	}
	return inst, nil
}

func (i *Instance) serve(ctx context.Context) { i.done <- i.Server.Serve(ctx) }

// Fabric experiments: what the hot path would cost with the replay log
// configured differently. They change the running instance's JetStream
// stream, never the bridge's code or defaults.
const (
	// FabricAsyncPersist makes the replay stream flush asynchronously
	// (JetStream persist_mode async, the bridge's default) instead of a
	// write per message.
	FabricAsyncPersist = "async-persist"
	// FabricSyncPersist makes the replay stream write each message before
	// the next (JetStream's default persist mode; nats.persist_mode sync).
	FabricSyncPersist = "sync-persist"
	// FabricNoReplay deletes the replay stream: events still go to NATS
	// (core publish, no subscriber) but are not stored.
	FabricNoReplay = "no-replay"
)

// applyFabric applies a fabric experiment ("" for none).
func (i *Instance) applyFabric(ctx context.Context, exp string) error {
	if exp == "" {
		return nil
	}
	js := i.Fabric().JetStream()
	st, err := js.Stream(ctx, bridge.EventsStream)
	if err != nil {
		return err
	}
	switch exp {
	case FabricAsyncPersist, FabricSyncPersist: // the mode cannot be updated: recreate the stream
		cfg := st.CachedInfo().Config
		cfg.PersistMode = jetstream.AsyncPersistMode
		if exp == FabricSyncPersist {
			cfg.PersistMode = jetstream.DefaultPersistMode
		}
		if err = js.DeleteStream(ctx, bridge.EventsStream); err == nil {
			_, err = js.CreateStream(ctx, cfg)
		}
	case FabricNoReplay:
		err = js.DeleteStream(ctx, bridge.EventsStream)
	default:
		err = fmt.Errorf("unknown fabric experiment %q (%s, %s, %s)", exp, FabricAsyncPersist, FabricSyncPersist, FabricNoReplay)
	}
	return err
}

// Close shuts the server down and removes its data folder.
func (i *Instance) Close() {
	i.cancel()
	<-i.done
	if i.dir != "" {
		os.RemoveAll(i.dir)
	}
}

// waitReady polls /readyz until 200 (10 s at most).
func waitReady(ctx context.Context, base string) error {
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s/readyz not ready within 10s", base)
}
