package agent_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/canonical"
	agentpeer "github.com/interlingua-dev/interlingua/conformance/peers/agent"
)

// streamCountingPeer is the reference peer behind a server that counts the
// event streams opened on it (POST /threads/{id}/stream/events).
func streamCountingPeer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	p, err := agentpeer.New()
	if err != nil {
		t.Fatal(err)
	}
	var streams atomic.Int64
	h := p.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/stream/events") {
			streams.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		p.Close()
		ts.Close()
	})
	return ts, &streams
}

func keepBackend(t *testing.T, cfg agent.BackendConfig) *agent.Backend {
	t.Helper()
	cfg.Timeout = wait
	b, err := agent.NewBackend(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func resumeRequest(thread string) *canonical.Request {
	req := request(thread, "research-agent")
	req.RunId += "-resume"
	req.Resume = map[string]*structpb.Value{"int-1": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"approved": structpb.NewBoolValue(true)}})}
	return req
}

// TestBackendKeepsThreadStream: a thread's second run (the resume of its
// interrupted first) reads on from the event stream the first run opened,
// and decodes to the same events as over a stream of its own (the golden
// file TestBackendDecodesPeer keeps, made with a backend per run). When
// the kept stream was closed while it waited, the run opens another and
// loses nothing; a run cut short by its context keeps none, nor does a
// run on a thread named for it alone; with keep_streams negative none is
// kept.
func TestBackendKeepsThreadStream(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "backend", "research-agent.events.golden"))
	if err != nil {
		t.Fatal(err)
	}
	twoRuns := func(t *testing.T, b *agent.Backend, thread string, between func()) {
		t.Helper()
		got := render(t, collect(t, b, request(thread, "research-agent")))
		between()
		got = append(append(got, "--- resume\n"...), render(t, collect(t, b, resumeRequest(thread)))...)
		if !bytes.Equal(got, want) {
			t.Errorf("events differ from a stream per run:\n%s", got)
		}
	}
	t.Run("kept", func(t *testing.T) {
		ts, streams := streamCountingPeer(t)
		b := keepBackend(t, agent.BackendConfig{URL: ts.URL})
		twoRuns(t, b, "keep-1", func() {
			if n := agent.KeptStreams(b); n != 1 {
				t.Errorf("after the first run %d streams kept, want 1", n)
			}
		})
		if n := streams.Load(); n != 1 {
			t.Errorf("%d event streams opened for two runs of one thread, want 1", n)
		}
	})
	t.Run("closed while kept", func(t *testing.T) {
		ts, streams := streamCountingPeer(t)
		b := keepBackend(t, agent.BackendConfig{URL: ts.URL})
		twoRuns(t, b, "keep-2", ts.CloseClientConnections)
		if n := streams.Load(); n != 2 {
			t.Errorf("%d event streams opened, want 2 (the kept one was closed)", n)
		}
	})
	t.Run("not kept", func(t *testing.T) {
		ts, streams := streamCountingPeer(t)
		b := keepBackend(t, agent.BackendConfig{URL: ts.URL, KeepStreams: -1})
		twoRuns(t, b, "keep-3", func() {})
		if n, kept := streams.Load(), agent.KeptStreams(b); n != 2 || kept != 0 {
			t.Errorf("keep_streams -1: %d event streams opened, %d kept; want 2 and 0", n, kept)
		}
	})
	t.Run("cancelled run", func(t *testing.T) {
		ts, _ := streamCountingPeer(t)
		b := keepBackend(t, agent.BackendConfig{URL: ts.URL})
		ctx, cancel := context.WithCancel(context.Background())
		st, err := b.Start(ctx, request("keep-4", "hang-agent"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, err := canonical.Collect(st); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if n := agent.KeptStreams(b); n != 0 {
			t.Errorf("a cancelled run left %d streams kept", n)
		}
	})
	t.Run("no thread of its own", func(t *testing.T) {
		ts, _ := streamCountingPeer(t)
		b := keepBackend(t, agent.BackendConfig{URL: ts.URL})
		for _, thread := range []string{"", "r-keep-6"} { // none, or the run's id (the bridge's naming)
			req := request("keep-6", "failing-agent")
			req.ThreadId = thread
			collect(t, b, req)
			if n := agent.KeptStreams(b); n != 0 {
				t.Errorf("thread %q: a run's own thread kept %d streams; it has no next run", thread, n)
			}
		}
	})
	t.Run("idle", func(t *testing.T) {
		ts, _ := streamCountingPeer(t)
		b := keepBackend(t, agent.BackendConfig{URL: ts.URL, KeepStreamIdle: time.Millisecond})
		collect(t, b, request("keep-5", "research-agent"))
		for deadline := time.Now().Add(wait); agent.KeptStreams(b) != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the kept stream was not closed after keep_stream_idle")
			}
		}
	})
}

// BenchmarkThreadRuns: two runs of one thread (a short script, run again)
// through the backend against the reference peer on loopback, with the
// thread's event stream kept between them and without (keep_streams -1):
// what a conversation's later turns save.
func BenchmarkThreadRuns(b *testing.B) {
	for _, c := range []struct {
		name string
		keep int
	}{{"kept", 0}, {"fresh", -1}} {
		b.Run(c.name, func(b *testing.B) {
			p, err := agentpeer.New()
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(p.Handler())
			defer func() { p.Close(); ts.Close() }()
			be, err := agent.NewBackend(agent.BackendConfig{URL: ts.URL, Timeout: wait, KeepStreams: c.keep})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				thread := "bench-" + strconv.Itoa(i)
				for run := range 2 {
					req := request(thread, "failing-agent")
					req.RunId += "-" + strconv.Itoa(run)
					st, err := be.Start(context.Background(), req)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := canonical.Collect(st); err != nil {
						b.Fatal(err)
					}
					st.Close()
				}
			}
		})
	}
}

// TestBackendKeptStreamDisrupted: runs of threads whose streams are kept,
// with the upstream's connections cut at random moments and runs closed
// by their client after their first event (a thread takes no more runs
// after a run so disturbed: the upstream may still be running it). Every
// run that starts ends with one terminal event, its last; every run
// nothing disturbed decodes to the same events as over a stream of its
// own; and nothing leaks (goleak, in TestMain), with the race detector on
// in CI. The replacement of a kept stream a cut closed is exercised here
// when a cut lands after its run; TestBackendKeepsThreadStream makes it
// happen every time.
func TestBackendKeptStreamDisrupted(t *testing.T) {
	ts, streams := streamCountingPeer(t)
	ref := render(t, collect(t, keepBackend(t, agent.BackendConfig{URL: ts.URL, KeepStreams: -1}), request("ref", "failing-agent")))
	// A command on a pooled connection the cut closed fails (a POST is not
	// retried); each command gets a connection of its own here, so the
	// cuts reach the event streams, running and kept.
	b := keepBackend(t, agent.BackendConfig{URL: ts.URL, HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
	rng := rand.New(rand.NewPCG(1, 2))
	runs := 0
	for i := range 60 {
		thread := "disrupted-" + strconv.Itoa(i)
		for run := range 3 {
			req := request(thread, "failing-agent")
			req.RunId += "-" + strconv.Itoa(run)
			if !disruptedRun(t, b, ts, req, rng, ref) {
				break
			}
			runs++
		}
	}
	// Streams were kept: fewer were opened than runs went undisturbed.
	if n := streams.Load(); n > int64(runs) {
		t.Errorf("%d event streams opened for %d undisturbed runs", n, runs)
	}
	t.Logf("%d undisturbed runs, %d event streams opened", runs, streams.Load())
}

// disruptedRun runs req, cut or left at random, checks its events, and
// reports whether nothing disturbed it (its thread may take another run).
func disruptedRun(t *testing.T, b *agent.Backend, ts *httptest.Server, req *canonical.Request, rng *rand.Rand, ref []byte) bool {
	t.Helper()
	cut, leave := rng.IntN(4) == 0, rng.IntN(6) == 0
	cutDone := make(chan struct{})
	if cut {
		delay := time.Duration(rng.IntN(500)) * time.Microsecond
		go func() {
			defer close(cutDone)
			time.Sleep(delay)
			ts.CloseClientConnections()
		}()
	} else {
		close(cutDone)
	}
	defer func() { <-cutDone }() // a cut lands in its own run, or on the stream kept after it
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := b.Start(ctx, req)
	if err != nil {
		if !cut {
			t.Fatalf("%s: start: %v", req.RunId, err)
		}
		return false
	}
	defer st.Close()
	var events []*canonical.Event
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", req.RunId, err)
		}
		events = append(events, ev)
		if leave {
			return false
		}
	}
	if len(events) == 0 {
		t.Fatalf("%s: no events", req.RunId)
	}
	for j, ev := range events {
		if _, ok := canonical.TerminalOf(ev); ok != (j == len(events)-1) {
			t.Fatalf("%s: event %d of %d is terminal: %v", req.RunId, j, len(events), ok)
		}
	}
	for _, e := range events {
		e.ThreadId, e.RunId = "", ""
	}
	got := render(t, events)
	if !bytes.Equal(got, ref) {
		if !cut {
			t.Fatalf("%s: undisturbed run over a kept stream:\n%s\nwant\n%s", req.RunId, got, ref)
		}
		return false // the cut reached it
	}
	return true
}
