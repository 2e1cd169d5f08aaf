package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// A run on demo-agent publishes every event on
// interlingua.events.<thread>.<run>, and a plain nats.go subscriber on the
// embedded server receives all of them, in order, as canonical Events.
func TestEventsOnEmbeddedNATS(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.NATS.EmbeddedListen = "127.0.0.1:0"
	inst := bridgetest.Start(t, &cfg)
	url := inst.Fabric().EmbeddedURL()
	if url == "" {
		t.Fatal("embedded server is not listening")
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msgs := subscribed(t, nc, "interlingua.events.thread-nats.>", 1024)

	body := `{"target":"demo-agent","threadId":"thread-nats","runId":"run-nats","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(inst.URL+"/v1/runs", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	wire, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := bytes.Split(bytes.TrimSpace(wire), []byte("\n"))
	if resp.StatusCode != 200 || len(lines) < 10 {
		t.Fatalf("status %d, %d lines: %s", resp.StatusCode, len(lines), wire)
	}

	var got []*canonical.Event
	timeout := time.After(10 * time.Second)
	for len(got) < len(lines) {
		select {
		case m := <-msgs:
			if m.Subject != "interlingua.events.thread-nats.run-nats" {
				t.Fatalf("subject %q", m.Subject)
			}
			evs, err := bridge.DecodeEvents(m.Data)
			if err != nil || len(evs) == 0 {
				t.Fatalf("message after event %d does not decode as a non-empty EventBatch: %v", len(got), err)
			}
			got = append(got, evs...)
		case <-timeout:
			t.Fatalf("received %d of %d events", len(got), len(lines))
		}
	}
	if err := canonical.Validate(got); err != nil {
		t.Fatal(err)
	}
	for i, ev := range got {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d: out of order", i, ev.GetSeq())
		}
		var line map[string]any
		_ = json.Unmarshal(lines[i], &line)
		if line["seq"] != strconv.FormatUint(ev.GetSeq(), 10) { // protojson writes uint64 as a string
			t.Fatalf("NATS event %d (seq %d) differs from the HTTP stream's (%v)", i, ev.GetSeq(), line["seq"])
		}
	}
	if st, ok := canonical.TerminalOf(got[len(got)-1]); !ok || st != canonical.StatusCompleted {
		t.Fatalf("last event %v", got[len(got)-1])
	}
}

func TestReadyz(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := client.Get(inst.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s = %d", p, resp.StatusCode)
		}
	}
}

// The replay stream is created with nats.persist_mode (async by default,
// sync when configured); a stream that exists keeps its mode, since
// JetStream cannot change it, and the fabric still starts.
func TestReplayStreamPersistMode(t *testing.T) {
	dir := t.TempDir()
	mode := func(t *testing.T, persist string) jetstream.PersistModeType {
		t.Helper()
		cfg := bridge.DefaultConfig()
		cfg.NATS.PersistMode = persist
		cfg.Defaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		f, err := bridge.StartFabric(context.Background(), cfg.NATS, dir, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, err := f.JetStream().Stream(context.Background(), bridge.EventsStream)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config.PersistMode
	}
	if got := mode(t, ""); got != jetstream.AsyncPersistMode {
		t.Fatalf("default persist mode %v, want async", got)
	}
	if got := mode(t, "sync"); got != jetstream.AsyncPersistMode {
		t.Fatalf("existing async stream became %v", got)
	}
	other := t.TempDir()
	dir = other
	if got := mode(t, "sync"); got != jetstream.DefaultPersistMode {
		t.Fatalf("persist_mode sync gave %v", got)
	}
	if got := mode(t, "async"); got != jetstream.DefaultPersistMode {
		t.Fatalf("existing sync stream became %v", got)
	}
}

func TestPersistModeValidated(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.NATS.PersistMode = "fast"
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "nats.persist_mode") {
		t.Fatalf("persist_mode fast: %v", err)
	}
}

// Every event of a long run is published, in EventBatch messages that
// decode to the events the client got, every field kept, in order
// (the publisher carves the encodings from shared arrays: none may
// overwrite another; the publish loop joins them into EventBatch messages).
func TestLongRunPublishedWhole(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.NATS.EmbeddedListen = "127.0.0.1:0"
	inst := bridgetest.Start(t, &cfg)
	nc, err := nats.Connect(inst.Fabric().EmbeddedURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	got := subscribed(t, nc, "interlingua.events.thread-long.>", 8192)
	req := &canonical.Request{Target: "stream", ThreadId: "thread-long", Parameters: map[string]*structpb.Value{
		"deltas": structpb.NewNumberValue(3000), "delta_text": structpb.NewStringValue("tok-ü "),
	}}
	s, err := inst.Bridge().Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := canonical.Collect(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 3000 || len(evs) > cap(got) {
		t.Fatalf("%d events", len(evs))
	}
	timeout := time.After(10 * time.Second)
	for i := 0; i < len(evs); {
		select {
		case m := <-got:
			batch, err := bridge.DecodeEvents(m.Data)
			if err != nil || len(batch) == 0 || i+len(batch) > len(evs) {
				t.Fatalf("message after event %d: %d events, %v", i, len(batch), err)
			}
			// The message is an EventBatch of the run's next events.
			for j, ev := range batch {
				if !proto.Equal(ev, evs[i+j]) {
					t.Fatalf("message after event %d (%s): event %d is %v, want %v", i, m.Subject, j, ev, evs[i+j])
				}
			}
			i += len(batch)
		case <-timeout:
			t.Fatalf("received %d of %d events", i, len(evs))
		}
	}
}

// subscribed subscribes nc to subject into a channel of n messages, live
// when it returns (flushed: the server has the subscription).
func subscribed(t *testing.T, nc *nats.Conn, subject string, n int) chan *nats.Msg {
	t.Helper()
	msgs := make(chan *nats.Msg, n)
	sub, err := nc.ChanSubscribe(subject, msgs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// With nats.token the embedded server's listener refuses a client without
// it, and the fabric itself (in process) and a client with it get in.
func TestEmbeddedListenerToken(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.NATS.EmbeddedListen, cfg.NATS.Token = "127.0.0.1:0", "s3cret"
	cfg.Defaults()
	f, err := bridge.StartFabric(context.Background(), cfg.NATS, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Ready() {
		t.Fatal("the fabric's own connection is not up")
	}
	url := f.EmbeddedURL()
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("a client without the token connected")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("without the token: %v, want an authorization violation", err)
	}
	nc, err := nats.Connect(url, nats.Token("s3cret"))
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	nc.Close()
}

// One data dir, one instance: a second embedded fabric on the same data
// dir is refused with a message naming it, and the dir is free again once
// the first closes.
func TestDataDirLocked(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.Defaults()
	dir := t.TempDir()
	first, err := bridge.StartFabric(context.Background(), cfg.NATS, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := bridge.StartFabric(context.Background(), cfg.NATS, dir, slog.New(slog.DiscardHandler)); err == nil {
		f.Close()
		first.Close()
		t.Fatal("a second instance started on the same data dir")
	} else if !strings.Contains(err.Error(), "in use by another interlingua") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second instance: %v", err)
	}
	first.Close()
	again, err := bridge.StartFabric(context.Background(), cfg.NATS, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	again.Close()
}
