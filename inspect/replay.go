package inspect

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/metrics"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

// replayTimeout bounds one replay; replaySlots bounds those in flight.
const (
	replayTimeout = 10 * time.Second
	replaySlots   = 2
)

var replaySem = make(chan struct{}, replaySlots)

// replayable lists the protocols a capture can be replayed as: those with
// a frontend and a client, but for one whose frontend keeps thread state
// through the bridge (a runtime: the agent protocol's reads its streams
// from the replay log), which a replay's private server has not.
func replayable() []string {
	var out []string
	for _, p := range protocols.All {
		if p.Mount != nil && p.Client != nil && p.NewRuntime == nil {
			out = append(out, p.Name)
		}
	}
	return out
}

// replayJSON is POST /v1/inspect/runs/{id}/replay's answer.
type replayJSON struct {
	Protocol string      `json:"protocol"`
	Wire     []chunkJSON `json:"wire"`
	Events   []eventJSON `json:"events"`
	Error    string      `json:"error,omitempty"`
}

// serveReplay re-renders a capture's canonical events as the wire of the
// protocol named by ?as=: that protocol's frontend, mounted on a private
// loopback server whose runner plays the captured events, is driven by
// that protocol's own client; the answer is the bytes the frontend wrote
// and read (bounded by max_bytes) and the events its client read back.
func (in *Inspector) serveReplay(w http.ResponseWriter, r *http.Request) {
	run := in.lookup(w, r)
	if run == nil {
		return
	}
	as := r.URL.Query().Get("as")
	p := protocols.Get(as)
	if p == nil || !slices.Contains(replayable(), as) {
		refuse(w, r, http.StatusBadRequest, canonical.CodeInvalidArgument, "replay: as="+quote(as)+" is not a protocol a capture can be replayed as (GET /v1/inspect/protocols)")
		return
	}
	select {
	case replaySem <- struct{}{}:
		defer func() { <-replaySem }()
	default:
		refuse(w, r, http.StatusTooManyRequests, canonical.CodeResourceExhausted, "replay: "+itoa(replaySlots)+" replays are running")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), replayTimeout)
	defer cancel()
	out := in.replay(ctx, run, p)
	writeJSON(w, out)
}

// replay runs the capture's events through p's frontend and client.
func (in *Inspector) replay(ctx context.Context, run *Run, p *protocol.Protocol) replayJSON {
	out := replayJSON{Protocol: p.Name, Wire: []chunkJSON{}, Events: []eventJSON{}}
	start := in.now()
	rec := &wire{in: in, limit: in.cfg.MaxBytes, until: start.Add(replayTimeout).UnixNano()}
	srv, closeSrv, err := in.replayServer(run, p, rec)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	events, err := replayClient(ctx, p, srv, run)
	closeSrv()
	if err != nil {
		out.Error = canonical.AsError(err).Error()
	}
	out.Wire, _ = rec.since(0, start)
	var b Run // feature and kind of the events read back
	for _, ev := range events {
		kind, text := kindOf(ev)
		js, _ := protoJSON.Marshal(ev)
		out.Events = append(out.Events, eventJSON{Seq: ev.GetSeq(), Kind: kind, Feature: b.feature(ev), Text: text,
			ClientOffset: -1, UpstreamOffset: -1, Event: js})
	}
	return out
}

// replayServer mounts p's frontend on a private loopback server whose
// runner plays run's events, recording its wire into rec.
func (in *Inspector) replayServer(run *Run, p *protocol.Protocol, rec *wire) (base string, closeFn func(), err error) {
	mux := http.NewServeMux()
	var closers []func()
	deps := protocol.FrontendDeps{Log: slog.New(slog.DiscardHandler), Runner: replayRunner{run: run}, Observer: noObserver{},
		CheckThread: func(context.Context, string) error { return nil }, Metrics: metrics.New(), Ready: func() bool { return true },
		OnShutdown: func(f func()) { closers = append(closers, f) }, OnClose: func(f func()) { closers = append(closers, f) }}
	if err := p.Mount(mux, deps); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	var versions http.Protocols
	versions.SetHTTP1(true)
	versions.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &versions, ReadHeaderTimeout: replayTimeout,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec.record(dirIn, true, requestHead(r))
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = &teeReadCloser{ReadCloser: r.Body, w: rec}
			}
			mux.ServeHTTP(&teeWriter{ResponseWriter: w, w: rec}, r)
		})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String(), func() {
		for _, f := range closers {
			f()
		}
		_ = srv.Close()
		<-done
	}, nil
}

// replayClient sends the captured request through p's client and reads
// the events back, up to the terminal one.
func replayClient(ctx context.Context, p *protocol.Protocol, base string, run *Run) ([]*canonical.Event, error) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	if p.Conformance != nil && p.Conformance.Multiplex {
		var v http.Protocols
		v.SetUnencryptedHTTP2(true)
		tr.Protocols = &v
	}
	cl, err := p.Client(protocol.ClientConfig{Base: base, Target: run.target, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, err
	}
	if c, ok := cl.(io.Closer); ok {
		defer func() { _ = c.Close() }()
	}
	req := &canonical.Request{Target: run.target}
	if run.request != nil {
		_ = protojson.Unmarshal(run.request, req)
		req.RunId, req.ThreadId = "", ""
		req.Target = run.target
	}
	s, err := cl.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = s.Close() }()
	var events []*canonical.Event
	size := 0
	for size < run.in.cfg.MaxBytes {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		events = append(events, ev)
		size += proto.Size(ev) + chunkOverhead
		if _, ok := canonical.TerminalOf(ev); ok {
			return events, nil
		}
	}
	return events, canonical.Errorf(canonical.CodeResourceExhausted, "replay: the client read more than max_bytes")
}

// replayRunner is the private frontend's runner: every run plays the
// capture's events again, stamped with the new run's ids and seqs.
type replayRunner struct{ run *Run }

func (rr replayRunner) Run(_ context.Context, req *canonical.Request) (canonical.Stream, error) {
	if req.RunId == "" {
		req.RunId = canonical.NewID("replay-")
	}
	if req.ThreadId == "" {
		req.ThreadId = req.RunId
	}
	rr.run.mu.Lock()
	var evs []*canonical.Event
	var g canonical.Guard
	for _, e := range rr.run.events {
		ev := &canonical.Event{}
		if protojson.Unmarshal(e.js, ev) != nil || g.Observe(ev) != nil {
			continue
		}
		evs = append(evs, ev)
	}
	rr.run.mu.Unlock()
	if !g.Ended() {
		evs = g.End(evs, canonical.StatusFailed, canonical.Errorf(canonical.CodeDataLoss, "the capture ends before the run's terminal event"))
	}
	for i, ev := range evs {
		ev.RunId, ev.ThreadId, ev.Seq = req.RunId, req.ThreadId, uint64(i+1)
	}
	return &sliceStream{evs: evs}, nil
}

func (rr replayRunner) Target(name string) (canonical.TargetInfo, bool) {
	return canonical.TargetInfo{Name: name, Backend: "replay"}, true
}

func (rr replayRunner) Targets() []canonical.TargetInfo {
	return []canonical.TargetInfo{{Name: rr.run.target, Backend: "replay"}}
}

// sliceStream plays events from a slice.
type sliceStream struct {
	evs  []*canonical.Event
	next int
}

func (s *sliceStream) Recv() (*canonical.Event, error) {
	if s.next == len(s.evs) {
		return nil, io.EOF
	}
	s.next++
	return s.evs[s.next-1], nil
}

// Buffered implements canonical.Buffered: every event is at hand.
func (s *sliceStream) Buffered() int { return len(s.evs) - s.next }
func (s *sliceStream) Close() error  { return nil }

// noObserver refuses observation: a replay has no thread to replay.
type noObserver struct{}

func (noObserver) Observe(context.Context, string, uint64) (canonical.Stream, error) {
	return nil, canonical.Errorf(canonical.CodeUnimplemented, "a replay has no thread to observe")
}

func (noObserver) LastSeq(context.Context, string) (uint64, error) {
	return 0, canonical.Errorf(canonical.CodeUnimplemented, "a replay has no thread to observe")
}
