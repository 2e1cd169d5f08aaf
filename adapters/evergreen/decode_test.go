package evergreen

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	ichunk "github.com/interlingua-dev/interlingua/internal/chunk"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// upstream is a backend-side store awaiting the outputs named.
func upstream(t testing.TB, outputs ...string) (*store, *outputDecoder) {
	st := newStore(Limits{}, false)
	outs := map[string]*node{}
	for _, name := range outputs {
		n, err := st.node(name + "_1")
		if err != nil {
			t.Fatal(err)
		}
		outs[name] = n
	}
	return st, newOutputDecoder(outs, outputs, 1<<20)
}

// decodeAll feeds the fragments in order and returns the events, ended
// with completed when every output is complete.
func decodeAll(t testing.TB, st *store, d *outputDecoder, frags []*ev.NodeFragment) ([]*canonical.Event, error) {
	var out []*canonical.Event
	for _, f := range frags {
		if err := st.apply(f); err != nil {
			return out, err
		}
		var err error
		if out, err = d.advance(out); err != nil {
			return out, err
		}
	}
	if !d.complete() {
		return out, fmt.Errorf("output %q incomplete", d.incomplete())
	}
	return d.b.End(out, canonical.StatusCompleted, nil), nil
}

// summary is a run's content independent of how it was cut: the text of
// each block type concatenated, and the other events in order.
func summary(events []*canonical.Event) string {
	text := map[canonical.BlockType]*strings.Builder{}
	var other []string
	var open canonical.BlockType
	for _, e := range events {
		switch k := e.GetKind().(type) {
		case *canonical.KindBlockStart:
			open = k.BlockStart.GetType()
			if open == canonical.BlockToolCall || open == canonical.BlockData || open == canonical.BlockRef {
				other = append(other, fmt.Sprintf("%s %s %s %s %s", open, k.BlockStart.GetId(), k.BlockStart.GetName(), k.BlockStart.GetMime(), k.BlockStart.GetRef()))
			}
		case *canonical.KindBlockDelta:
			if text[open] == nil {
				text[open] = &strings.Builder{}
			}
			text[open].WriteString(k.BlockDelta.GetText())
			text[open].Write(k.BlockDelta.GetData())
		case *canonical.KindToolStarted, *canonical.KindToolFinished, *canonical.KindToolFailed, *canonical.KindToolOutput, *canonical.KindInputRequested:
			b, _ := protojson.Marshal(e)
			v := json.Value(b)
			_ = v.Compact()
			other = append(other, string(v))
		case *canonical.KindLifecycle:
			if st, ok := canonical.TerminalOf(e); ok {
				other = append(other, st.String())
			}
		}
	}
	var sb strings.Builder
	for _, bt := range []canonical.BlockType{canonical.BlockText, canonical.BlockReasoning, canonical.BlockToolCall, canonical.BlockData} {
		if text[bt] != nil {
			fmt.Fprintf(&sb, "%s: %q\n", bt, text[bt].String())
		}
	}
	for _, o := range other {
		sb.WriteString(o + "\n")
	}
	return sb.String()
}

// rendered returns the fragments a frontend renders for a run.
func rendered(t testing.TB, events []*canonical.Event, outputs ...string) []*ev.NodeFragment {
	st := newStore(Limits{}, false)
	counterIDs(st)
	g := &generate{}
	for _, name := range outputs {
		n, _ := st.reserve(name + "_1")
		switch name {
		case OutputResponse:
			g.response = append(g.response, n)
		case OutputReasoning:
			g.reasoning = n
		case OutputToolCalls:
			g.tools = n
		}
	}
	sk := &memSink{st: st}
	r := newRenderer(sk, g, false, false, 1<<20)
	for _, e := range events {
		if done, err := r.event(e); err != nil {
			t.Fatal(err)
		} else if done {
			break
		}
	}
	var frags []*ev.NodeFragment
	for _, m := range sk.msgs {
		frags = append(frags, m.GetNodeFragments()...)
	}
	return frags
}

// TestDecodeOutputs decodes an upstream's output fragments into events:
// golden transcripts, valid streams, and the content of the run that
// produced them.
func TestDecodeOutputs(t *testing.T) {
	cases := []struct {
		name    string
		outputs []string
		frags   []*ev.NodeFragment
		want    string // summary; "" to skip
	}{
		{name: "agent", outputs: []string{"response", "reasoning", "tool_calls"},
			frags: rendered(t, agentRun(), "response", "reasoning", "tool_calls"), want: summary(agentRun())},
		{name: "echo", outputs: []string{"response"}, frags: rendered(t, echoRun(), "response"), want: summary(echoRun())},
		{name: "parts", outputs: []string{"response"}, frags: rendered(t, imageRun(false), "response"), want: summary(imageRun(false))},
		{name: "spec-server-example", outputs: []string{"response"}, frags: []*ev.NodeFragment{
			L("response_1", 0, true, "It is a translation of an ", tp), L("response_1", 1, false, "F1 race. ", tp)}},
		{name: "actionengine-vector", outputs: []string{"response"}, frags: []*ev.NodeFragment{
			P("response_1", 0, true, "child"), L("child", 0, false, "test response", tp, "model"), E("response_1", 1, false)}},
		{name: "out-of-order-interleaved", outputs: []string{"response", "reasoning"}, frags: []*ev.NodeFragment{
			L("response_1", 1, true, "wor"), P("reasoning_1", 0, true, "r1"), L("r1", 1, false, "ink."),
			L("response_1", 0, true, "Hello ", tp), L("r1", 0, true, "I th", tp), E("reasoning_1", 1, false), L("response_1", 2, false, "ld")}},
		{name: "split-rune", outputs: []string{"response"}, frags: []*ev.NodeFragment{
			L("response_1", 0, true, "a\xF0\x9F", tp), L("response_1", 1, true, "\x98"), L("response_1", 2, false, "\x80b")}},
		{name: "end-of-turn-skipped", outputs: []string{"response"}, frags: []*ev.NodeFragment{
			P("response_1", 0, false, "t", "e"), L("t", 0, false, "hi", tp, "model"), M("e", 0, false, eot)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, d := upstream(t, tc.outputs...)
			events, err := decodeAll(t, st, d, tc.frags)
			if err != nil {
				t.Fatal(err)
			}
			if err := canonical.Validate(events); err != nil {
				t.Fatal(err)
			}
			var sb strings.Builder
			for _, e := range events {
				b, _ := protojson.Marshal(e)
				v := json.Value(b)
				_ = v.Compact()
				sb.WriteString(string(v) + "\n")
			}
			golden(t, "decode-"+tc.name+".golden", sb.String())
			if tc.want != "" {
				if got := summary(events); got != tc.want {
					t.Errorf("content\n got %s\nwant %s", got, tc.want)
				}
			}
		})
	}
}

// TestDecodeRefragmented: however the upstream cuts its output nodes into
// fragments and orders them, the decoded content is the same, every event
// stream is valid, and no text delta splits a rune.
func TestDecodeRefragmented(t *testing.T) {
	base := rendered(t, agentRun(), "response", "reasoning", "tool_calls")
	want := summary(agentRun())
	for seed := uint64(0); seed < 500; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		frags := refragment(r, base)
		r.Shuffle(len(frags), func(i, j int) { frags[i], frags[j] = frags[j], frags[i] })
		st, d := upstream(t, "response", "reasoning", "tool_calls")
		events, err := decodeAll(t, st, d, frags)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := canonical.Validate(events); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if got := summary(events); got != want {
			t.Fatalf("seed %d: content\n got %s\nwant %s", seed, got, want)
		}
	}
}

// refragment re-cuts every leaf's bytes at random points (splitting runes)
// and renumbers the fragments; non-leaf fragments are kept.
func refragment(r *rand.Rand, frags []*ev.NodeFragment) []*ev.NodeFragment {
	type leaf struct {
		meta *ev.ChunkMetadata
		data []byte
	}
	leaves := map[string]*leaf{}
	var order []string
	var out []*ev.NodeFragment
	for _, f := range frags {
		if f.GetChunkFragment() == nil && len(f.GetChildIds()) == 0 {
			if _, ok := leaves[f.GetId()]; ok {
				continue // the leaf's closing fragment
			}
		}
		if f.GetChunkFragment() == nil {
			out = append(out, f)
			continue
		}
		l := leaves[f.GetId()]
		if l == nil {
			l = &leaf{meta: f.GetChunkFragment().GetMetadata()}
			leaves[f.GetId()] = l
			order = append(order, f.GetId())
		}
		l.data = append(l.data, f.GetChunkFragment().GetData()...)
	}
	for _, id := range order {
		l := leaves[id]
		pieces := ichunk.Split(l.data, r.Uint64(), 1+r.IntN(5))
		for i, p := range pieces {
			f := &ev.NodeFragment{Id: id, Seq: int32(i), Continued: i < len(pieces)-1,
				ChunkFragment: &ev.Chunk{Payload: &ev.Chunk_Data{Data: p}}}
			if i == 0 {
				f.ChunkFragment.Metadata = l.meta
			}
			out = append(out, f)
		}
	}
	return out
}

// decodeMessages runs the backend's decoding of upstream messages, one
// advance per message as Recv does; an error ends the run failed.
func decodeMessages(t testing.TB, ms []*ev.SessionMessage) []*canonical.Event {
	st, d := upstream(t, "response", "reasoning", "tool_calls")
	st.lim = Limits{MaxDepth: 8, MaxNodes: 64, MaxBytes: 8192}.withDefaults()
	d.maxChunk = 1024
	var out []*canonical.Event
	fail := func(err error) []*canonical.Event {
		return d.b.End(out, canonical.StatusFailed, canonical.AsError(err))
	}
	for _, m := range ms {
		var err error
		if out, err = d.feed(st, m, out); err != nil {
			return fail(err)
		}
		if st.bytes+st.held > st.lim.MaxBytes || len(st.nodes) > st.lim.MaxNodes {
			t.Fatalf("store past its limits")
		}
	}
	if !d.complete() {
		return fail(fmt.Errorf("incomplete"))
	}
	return d.b.End(out, canonical.StatusCompleted, nil)
}

// FuzzOutputDecoder feeds arbitrary upstream messages to the backend's
// decoder: no panic, a valid event stream whatever arrives, and the same
// content whether fragments come grouped or one per message.
func FuzzOutputDecoder(f *testing.F) {
	for _, name := range []string{"render-agent-all.golden", "render-echo-grpc.golden", "render-parts.golden", "render-echo-aliases.golden"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		var ms []*ev.SessionMessage
		for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			m := &ev.SessionMessage{}
			if err := protojson.Unmarshal(line, m); err != nil {
				f.Fatal(err)
			}
			ms = append(ms, m)
		}
		f.Add(encodeSession(ms))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms := decodeSession(b)
		grouped := decodeMessages(t, ms)
		if err := canonical.Validate(grouped); err != nil {
			t.Fatal(err)
		}
		var single []*ev.SessionMessage
		for _, m := range ms {
			for _, fr := range m.GetNodeFragments() {
				single = append(single, &ev.SessionMessage{NodeFragments: []*ev.NodeFragment{fr}})
			}
		}
		one := decodeMessages(t, single)
		if err := canonical.Validate(one); err != nil {
			t.Fatal(err)
		}
		if a, b := summary(grouped), summary(one); a != b {
			t.Fatalf("grouping changed the content:\n%s\n%s", a, b)
		}
	})
}
