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

func TestPeerScripts(t *testing.T) {
	r := &cv1.Response{
		Echo: true,
		Items: []*cv1.Item{
			{Kind: &cv1.Item_Reasoning{Reasoning: &cv1.Text{Text: "hidden"}}},
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: " 😀", Cuts: []uint32{3}}}},
			{Kind: &cv1.Item_Error{Error: &cv1.Failure{Code: "unavailable", Message: "m1 down"}}},
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: "again"}}},
		},
		Failure: &cv1.Failure{Code: "data_loss", Message: "gone"},
		DelayMs: 3,
	}
	m := TritonModel("x", r, "hi there")
	if d := cmp.Diff([]string{"hi", " there", " \xF0\x9F", "\x98\x80", "again"}, m.Chunks); d != "" {
		t.Fatalf("triton chunks: %s", d)
	}
	if m.ErrorMessage != "gone" || m.ErrorAt != 5 || m.Delay != 3*time.Millisecond {
		t.Fatalf("triton model %+v", m)
	}
	empty := TritonModel("e", &cv1.Response{}, "prompt")
	if empty.Chunks == nil || len(empty.Chunks) != 0 {
		t.Fatalf("an empty answer must not echo: chunks %#v", empty.Chunks)
	}
	g := GlideRouter("latch", r, "hi there")
	if len(g.Models) != 2 {
		t.Fatalf("%d models, want 2 (a fallback)", len(g.Models))
	}
	var texts []string
	for _, st := range g.Models[0].Steps {
		texts = append(texts, st.Text)
	}
	if d := cmp.Diff([]string{"hi", " there", " ", "😀", ""}, texts); d != "" {
		t.Fatalf("glide model 1 steps: %s", d)
	}
	if last := g.Models[1].Steps[len(g.Models[1].Steps)-1]; last.Unavailable != "gone" {
		t.Fatalf("glide model 2 ends with %+v, want the failure", last)
	}
}

func TestEvergreenScript(t *testing.T) {
	r := &cv1.Response{
		Items: []*cv1.Item{
			{Kind: &cv1.Item_Reasoning{Reasoning: &cv1.Text{Text: "r1 r2"}}},
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: "a b"}}},
			{Kind: &cv1.Item_ToolCall{ToolCall: &cv1.ToolCall{Id: "c", Name: "n", Arguments: &cv1.Text{Text: `{"x":1}`, ChunkBytes: 2}}}},
			{Kind: &cv1.Item_Error{Error: &cv1.Failure{Code: "unavailable"}}},
			{Kind: &cv1.Item_Text{Text: &cv1.Text{Text: "c"}}},
			{Kind: &cv1.Item_Ref{Ref: &cv1.Ref{Mime: "image/png", Uri: "https://x/y"}}},
		},
		Failure: &cv1.Failure{Code: "data_loss", Message: "m"},
	}
	sc := EvergreenScript(r, "")
	var got []string
	for _, p := range sc.Parts {
		s := p.Output + ":"
		for _, f := range p.Fragments {
			s += "|" + string(f)
		}
		if p.Ref != "" {
			s += "ref=" + p.Ref
		}
		got = append(got, s)
	}
	want := []string{"reasoning:|r1| r2", "response:|a| b", `tool_calls:|{"arguments":"{\"x\":1}","id":"c","name":"n","type":"tool_call"}`, "response:|c", "response:ref=https://x/y"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
	if sc.Abort == nil || sc.Abort.Code() != 15 || sc.Abort.Message() != "m" {
		t.Fatalf("abort %v", sc.Abort)
	}
}
