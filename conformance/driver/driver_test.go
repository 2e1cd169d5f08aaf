package driver

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/cases"
	"github.com/interlingua-dev/interlingua/conformance/transcript"
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

func TestDeltas(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *cv1.Text
		want []string
	}{
		{"words", &cv1.Text{Text: "a bb ccc"}, []string{"a", " bb", " ccc"}},
		{"empty", &cv1.Text{}, nil},
		{"chunks", &cv1.Text{Text: "abcdefg", ChunkBytes: 3}, []string{"abc", "def", "g"}},
		{"repeat", &cv1.Text{Text: "ab", Repeat: 3, ChunkBytes: 4}, []string{"abab", "ab"}},
		{"cuts inside a rune", &cv1.Text{Text: " 😀!", Cuts: []uint32{3}}, []string{" \xF0\x9F", "\x98\x80!"}},
		{"cuts unsorted, duplicate, out of range", &cv1.Text{Text: "abcdef", Cuts: []uint32{4, 2, 2, 0, 99}}, []string{"ab", "cd", "ef"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Deltas(tc.in)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatal(d)
			}
			if strings.Join(got, "") != Full(tc.in) {
				t.Fatalf("deltas join to %q, want %q", strings.Join(got, ""), Full(tc.in))
			}
		})
	}
}

func TestWholeRunes(t *testing.T) {
	in := []string{"a\xF0", "\x9F\x98", "\x80b", "\xE2\x82", "\xAC"}
	got := WholeRunes(in)
	want := []string{"a", "😀b", "€"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
	for _, d := range got {
		if !utf8.ValidString(d) {
			t.Fatalf("%q is not whole UTF-8", d)
		}
	}
}

// Every case's definition plays as a valid canonical event stream, and
// its transcript is the Ideal one.
func TestBackendPlaysEveryCase(t *testing.T) {
	all, err := cases.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		t.Run(c.GetName(), func(t *testing.T) {
			r := c.GetResponse()
			hung := make(chan struct{}, 1)
			be := &Backend{Lookup: func(target string) (*Script, bool) {
				return &Script{Response: r, Hanging: func() { hung <- struct{}{} }}, target == "t"
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req := &canonical.Request{Target: "t", Inputs: []*canonical.NamedNode{{Name: "prompt", Node: canonical.TextNode("user", c.GetRequest().GetPrompt())}}}
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			s, err := be.Start(runCtx, req)
			b := transcript.NewBuilder()
			switch {
			case RefusesBeforeFirstEvent(r):
				if err == nil {
					s.Close()
					t.Fatal("Start succeeded for a definition that refuses")
				}
				b.Refuse(err)
			case err != nil:
				t.Fatal(err)
			default:
				if r.GetHang() {
					go func() {
						select {
						case <-hung:
							stop()
						case <-ctx.Done():
						}
					}()
				}
				evs, err := canonical.Collect(s)
				if err != nil {
					t.Fatal(err)
				}
				if err := canonical.Validate(evs); err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					b.Add(ev)
				}
			}
			got := transcript.Normalize(b.Transcript())
			want := Ideal(r, c.GetRequest().GetPrompt())
			if r.GetHang() {
				want.Code = got.GetCode() // the code of a cancel is the context's
			}
			if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func TestBackendUnknownTarget(t *testing.T) {
	be := &Backend{Lookup: func(string) (*Script, bool) { return nil, false }}
	_, err := be.Start(context.Background(), &canonical.Request{Target: "nope"})
	if canonical.CodeOf(err) != canonical.CodeNotFound {
		t.Fatalf("got %v, want not_found", err)
	}
	if be.Knows("nope") {
		t.Fatal("Knows an unknown target")
	}
}

// Closing a run that has not ended reports the cancel once; a delayed
// delta does not outlive the cancel.
func TestBackendCancelHooks(t *testing.T) {
	cancelled := make(chan struct{}, 4)
	r := &cv1.Response{Items: []*cv1.Item{{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: "a b c d"}}}}, DelayMs: 60_000}
	be := &Backend{Lookup: func(string) (*Script, bool) {
		return &Script{Response: r, Cancelled: func() { cancelled <- struct{}{} }}, true
	}}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := be.Start(ctx, &canonical.Request{Target: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.Recv() // running
	if err != nil || ev.GetLifecycle() == nil {
		t.Fatalf("first event %v, %v", ev, err)
	}
	done := make(chan []*canonical.Event)
	go func() {
		var evs []*canonical.Event
		for {
			ev, err := s.Recv()
			if errors.Is(err, io.EOF) {
				done <- evs
				return
			}
			evs = append(evs, ev)
		}
	}()
	cancel()
	evs := <-done
	if st, ok := canonical.TerminalOf(evs[len(evs)-1]); !ok || st != canonical.StatusCancelled {
		t.Fatalf("ended with %v", evs[len(evs)-1])
	}
	s.Close()
	if len(cancelled) != 1 {
		t.Fatalf("cancel reported %d times, want 1", len(cancelled))
	}
}
