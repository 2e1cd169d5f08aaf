// Package bridgetest starts a whole Interlingua instance in a test: embedded
// NATS in a temporary folder, every frontend mounted on a loopback
// listener, the default scripted targets routed.
package bridgetest

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
)

// Instance is a running server.
type Instance struct {
	*bridge.Server
	// URL is the base URL, e.g. http://127.0.0.1:40123.
	URL string
}

// Start starts an instance with cfg (DefaultConfig when nil); the test's
// cleanup shuts it down and waits for it. Listen and DataDir are forced to
// a loopback port and a temporary folder unless set.
func Start(t testing.TB, cfg *bridge.Config) *Instance {
	t.Helper()
	return start(t, cfg, "http", nil)
}

// StartLogged is Start with the server logging to log.
func StartLogged(t testing.TB, cfg *bridge.Config, log *slog.Logger) *Instance {
	t.Helper()
	return start(t, cfg, "http", log)
}

// StartTLS is Start for a config with TLS: the URL is https and readiness
// is not awaited over HTTP (the caller's client needs the certificate).
func StartTLS(t testing.TB, cfg *bridge.Config) *Instance {
	t.Helper()
	return start(t, cfg, "https", nil)
}

func start(t testing.TB, cfg *bridge.Config, scheme string, log *slog.Logger) *Instance {
	t.Helper()
	c := bridge.DefaultConfig()
	if cfg != nil {
		c = *cfg
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
	if c.DataDir == "" {
		c.DataDir = t.TempDir()
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 2 * time.Second
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	switch {
	case log != nil:
	case testing.Verbose():
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	default:
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := bridge.NewServer(ctx, c, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	inst := &Instance{Server: srv, URL: scheme + "://" + srv.Addr()}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	if scheme == "http" {
		waitReady(t, inst.URL)
	}
	return inst
}

func waitReady(t testing.TB, base string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s/readyz not 200 within 10s", base)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
