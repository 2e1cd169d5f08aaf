package evergreen_test

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/interlingua-dev/interlingua/adapters/evergreen"
	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/canonical/canonicaltest"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
)

// gatedText is a run of n text deltas " t0" to " t<n-1>" that says how
// many events Recv returns without waiting (as the bridge's runs do), and
// waits for a release before every every-th delta (before " t9", " t19",
// ... with every 10): until the client has every fragment sent so far,
// failing the run after 10 s, so a message held back by the frontend fails
// the test instead of hanging it. It returns the run, its release and the
// text it streams.
func gatedText(n, every int) (*canonicaltest.Script, chan struct{}, string) {
	b := canonical.NewBuilder()
	evs := b.Lifecycle(nil, canonical.StatusRunning)
	want := ""
	waitAt := map[int]bool{}
	for i := range n {
		if i%every == every-1 {
			waitAt[len(evs)] = true // before this delta (its event is the last Text appends)
		}
		evs = b.Text(evs, fmt.Sprintf(" t%d", i))
		want += fmt.Sprintf(" t%d", i)
	}
	evs = b.End(evs, canonical.StatusCompleted, nil)
	// Text appends message and block starts before the first delta: the
	// wait marks above point at the delta event when it is alone.
	fixed := map[int]bool{}
	for i := range waitAt {
		for evs[i].GetBlockDelta() == nil {
			i++
		}
		fixed[i] = true
	}
	release := make(chan struct{}, len(fixed)+n/every)
	s := &canonicaltest.Script{Events: evs, Wait: fixed}
	s.BeforeWait = func() error {
		select {
		case <-release:
			return nil
		case <-time.After(10 * time.Second):
			return canonical.Errorf(canonical.CodeDeadlineExceeded, "test: the client never got the fragments sent before event %d", s.Taken())
		}
	}
	return s, release, want
}

// gatedRunner serves a gated run.
func gatedRunner(s *canonicaltest.Script) canonicaltest.Runner {
	return canonicaltest.Runner{Stream: canonicaltest.Buffered(s)}
}

// Over gRPC the frontend lets a burst of fragments share writes while the
// run has more at hand, and flushes before it waits: the client has every
// fragment sent before each wait, and the output reassembles whole.
func TestFlushesBeforeWaiting(t *testing.T) {
	const n = 40
	gs, release, want := gatedText(n, 10)
	srv, _ := standalone(t, evergreen.FrontendConfig{Runner: gatedRunner(gs)})

	s := client(t, srv.URL, connect.WithGRPC()).StartSession(testCtx(t))
	if err := s.Send(generate("x", "p1", "response=r1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(frags(textNode("p1", "hi", "user"))); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseRequest()
	var msgs []*ev.SessionMessage
	deltas, next := 0, 9
	for {
		m, err := s.Receive()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
		for _, f := range m.GetNodeFragments() {
			if len(f.GetChunkFragment().GetData()) > 0 {
				deltas++
			}
		}
		for ; deltas >= next; next += 10 { // every delta before the next wait is here
			release <- struct{}{}
		}
	}
	if err := s.CloseResponse(); err != nil {
		t.Fatal(err)
	}
	if got := reassemble(t, msgs, true).mustText("r1"); got != want {
		t.Fatalf("response %q, want %q", got, want)
	}
	if gs.Taken() != len(gs.Events) {
		t.Fatalf("run read %d of %d events", gs.Taken(), len(gs.Events))
	}
}

// The backend's Buffered counts the events of the messages whose bytes it
// has read, no more and no fewer. Upstream, the frontend sends each burst
// of a gated run (deltas t0-t8, t9-t18, t19-t28, t29-t38, then t39 and the
// end) in one flush, and waits for a release before the next: the backend
// drains a burst without waiting on the upstream (had it waited, the
// upstream's run fails after 10 s and the text is cut), and Buffered says
// 0 exactly at the bursts' ends (after t39 too when the end comes in a
// later read).
func TestBackendBufferedBurst(t *testing.T) {
	for _, protocol := range []string{"grpc", "connect"} {
		t.Run(protocol, func(t *testing.T) {
			gs, release, want := gatedText(40, 10)
			srv, _ := standalone(t, evergreen.FrontendConfig{Runner: gatedRunner(gs)})
			be, err := evergreen.NewBackend(evergreen.BackendConfig{URL: srv.URL, Protocol: protocol})
			if err != nil {
				t.Fatal(err)
			}
			s, err := be.Start(testCtx(t), textRequest("x", "hi"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var events []*canonical.Event
			var ends []int // deltas received when Buffered said 0
			deltas := 0
			recv := func() bool {
				e, err := s.Recv()
				if errors.Is(err, io.EOF) {
					return false
				}
				if err != nil {
					t.Fatal(err)
				}
				events = append(events, e)
				if e.GetBlockDelta() != nil {
					deltas++
				}
				return true
			}
			for recv() {
				for k := s.(canonical.Buffered).Buffered(); k > 0; k-- {
					if !recv() {
						t.Fatalf("Buffered counted %d events past the end", k)
					}
				}
				// Before the first delta nothing has been read: the
				// lifecycle event comes from the backend itself.
				if _, end := canonical.TerminalOf(events[len(events)-1]); !end && deltas > 0 {
					ends = append(ends, deltas)
					select {
					case release <- struct{}{}:
					default: // more ends than waits: reported below
					}
				}
			}
			if err := canonical.Validate(events); err != nil {
				t.Fatal(err)
			}
			if st, ce := terminal(events); st != canonical.StatusCompleted || textOf(events) != want {
				t.Fatalf("ended %s %v with %q, want %q", st, ce, textOf(events), want)
			}
			if got := fmt.Sprint(ends); got != "[9 19 29]" && got != "[9 19 29 39]" {
				t.Fatalf("Buffered said 0 after deltas %v, want at the bursts' ends [9 19 29] (and 39)", got)
			}
		})
	}
}
