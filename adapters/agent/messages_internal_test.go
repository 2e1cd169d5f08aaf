package agent

import (
	"bytes"
	stdjson "encoding/json" // decodeAppend and the checks: how it was done before
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// decodeAppend is how messages were appended before appendMessages:
// decode the stored array, append, join.
func decodeAppend(stored json.Value, msgs []json.Value) json.Value {
	var cur []json.Value
	if stored != nil {
		_ = stdjson.Unmarshal(stored, &cur)
	}
	return joinArray(append(cur, msgs...))
}

// randomMessages is n messages as compact JSON, as the runtime makes them
// (encoding/json's bytes, as it made them before: the splice and the
// benchmarks do not depend on how <, > and & are written).
func randomMessages(rng *rand.Rand, n int) []json.Value {
	texts := []string{"", "hi", "ünï ☃", `q"uote\`, "<tag>&", "\u2028x", "[1,2]", "a,b]"}
	out := make([]json.Value, n)
	for i := range out {
		m := map[string]any{"id": fmt.Sprint("m", rng.IntN(1e6)), "type": []string{"human", "ai", "tool"}[rng.IntN(3)], "content": texts[rng.IntN(len(texts))]}
		if rng.IntN(4) == 0 {
			m["tool_calls"] = []any{map[string]any{"id": "c1", "args": map[string]any{"x": []any{1, nil, "y"}}}}
		}
		out[i], _ = stdjson.Marshal(m)
	}
	return out
}

// TestAppendMessages checks appendMessages against decoding and
// joining, over random histories: the same bytes for a stored compact array
// (what this package stores) or for a value that is not an array; the same
// JSON for an array written with white space. A checkpoint holding the old
// value keeps it.
func TestAppendMessages(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		add := randomMessages(rng, 1+rng.IntN(3))
		var stored json.Value
		spaced := false
		switch k := rng.IntN(10); {
		case k < 5:
			stored = joinArray(randomMessages(rng, rng.IntN(6)))
		case k < 7: // an array as a person or another tool might write it
			var parts []string
			for _, m := range randomMessages(rng, rng.IntN(4)) {
				parts = append(parts, string(m))
			}
			stored = json.Value(" [ " + strings.Join(parts, " ,\n ") + " ]\t")
			spaced = true
		case k < 9:
			stored = json.Value([]string{`null`, `{"a":[1]}`, `"[x]"`, `7`, `[]`, ` [ ] `}[rng.IntN(6)])
		default: // no key
		}
		th := &convo{}
		th.rec.Values = map[string]json.Value{"other": json.Value(`1`)}
		if stored != nil {
			th.rec.Values["messages"] = stored
		}
		checkpoint := cloneValues(th.rec.Values)
		before := bytes.Clone(stored)

		th.appendMessages(add)
		got, want := th.rec.Values["messages"], decodeAppend(stored, add)
		if !stdjson.Valid(got) {
			t.Fatalf("case %d: %q + %d messages = invalid JSON %q", i, stored, len(add), got)
		}
		if spaced {
			var g, w any
			_ = stdjson.Unmarshal(got, &g)
			_ = stdjson.Unmarshal(want, &w)
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("case %d: %q + %q = %q, want the JSON of %q", i, stored, add, got, want)
			}
		} else if !bytes.Equal(got, want) {
			t.Fatalf("case %d: %q + %q = %q, want %q", i, stored, add, got, want)
		}
		if !bytes.Equal(checkpoint["messages"], before) || string(th.rec.Values["other"]) != "1" {
			t.Fatalf("case %d: a checkpoint's messages changed to %q", i, checkpoint["messages"])
		}
	}
}

// BenchmarkAppendMessages is one step's append to a 1,000-message history
// (64 KB): appendMessages, and decodeAppend for comparison.
func BenchmarkAppendMessages(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	history := joinArray(randomMessages(rng, 1000))
	add := []json.Value{json.Value(`{"id":"m","type":"ai","content":"` + strings.Repeat("x", 200) + `"}`)}
	b.Run("splice", func(b *testing.B) {
		th := &convo{}
		b.SetBytes(int64(len(history)))
		b.ReportAllocs()
		for b.Loop() {
			th.rec.Values = map[string]json.Value{"messages": history}
			th.appendMessages(add)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(history)))
		b.ReportAllocs()
		for b.Loop() {
			decodeAppend(history, add)
		}
	})
}

// TestHistoryCache checks the history a run is sent (historyNodes, kept
// between runs and extended by appendMessages) against decoding the
// stored messages afresh, after each of random steps: messages appended;
// the value replaced by another array, one written with white space, an
// earlier value (a fork), a value that is not an array, or none; or by a
// copy of the value with messages appended, or without (a backend's state
// snapshot: new bytes, the same conversation).
func TestHistoryCache(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for c := range 200 {
		th := &convo{}
		th.rec.Values = map[string]json.Value{}
		var earlier []json.Value
		for step := range 30 {
			switch k := rng.IntN(12); {
			case k < 5:
				th.appendMessages(withBlocks(rng, randomMessages(rng, 1+rng.IntN(3))))
			case k < 6:
				th.rec.Values["messages"] = joinArray(randomMessages(rng, rng.IntN(4)))
			case k < 7 && len(earlier) > 0:
				th.rec.Values["messages"] = earlier[rng.IntN(len(earlier))]
			case k < 8:
				th.rec.Values["messages"] = json.Value(" [ " + string(randomMessages(rng, 1)[0]) + " ]\n")
			case k < 9:
				th.rec.Values["messages"] = json.Value([]string{`null`, `{"a":[1]}`, `[]`, ` [ ] `}[rng.IntN(4)])
			case k < 11:
				th.rec.Values["messages"] = snapshotOf(th.rec.Values["messages"], withBlocks(rng, randomMessages(rng, rng.IntN(3))))
			default:
				delete(th.rec.Values, "messages")
			}
			earlier = append(earlier, th.rec.Values["messages"])
			if rng.IntN(3) == 0 {
				continue // not every step is followed by a run
			}
			got := &canonical.Node{Children: th.historyNodes()}
			want := historyNode(th.messages())
			if !proto.Equal(got, want) {
				t.Fatalf("case %d step %d: messages %s\nsent %v\nwant %v", c, step, th.rec.Values["messages"], got, want)
			}
			// A run appends its input to the history it is sent.
			_ = append(slices.Clip(th.historyNodes()), canonical.TextNode("user", "x"))
		}
	}
}

// snapshotOf is stored as a backend's snapshot would give it back: in new
// bytes, with msgs appended (appendMessages's splice, which copies,
// on a thread of its own, so no history cache sees it).
func snapshotOf(stored json.Value, msgs []json.Value) json.Value {
	th := &convo{}
	th.rec.Values = map[string]json.Value{"messages": stored}
	th.appendMessages(msgs)
	return th.rec.Values["messages"]
}

// withBlocks gives some of msgs a content of text blocks instead of a string.
func withBlocks(rng *rand.Rand, msgs []json.Value) []json.Value {
	for i := range msgs {
		if rng.IntN(3) == 0 {
			msgs[i] = json.Value(fmt.Sprintf(`{"type":"ai","content":[{"type":"text","text":"a%d"},{"type":"image"},{"type":"text","text":"b"}]}`, i))
		}
	}
	return msgs
}

// BenchmarkHistory is the history a run on a 1,000-message thread (64 KB)
// is sent: kept (a step's append, then historyNodes) or decoded afresh.
func BenchmarkHistory(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	history := joinArray(randomMessages(rng, 1000))
	add := []json.Value{json.Value(`{"id":"m","type":"ai","content":"done"}`)}
	// cached is a thread whose history cache holds history's nodes.
	cached := func() (*convo, []*canonical.Node) {
		th := &convo{}
		th.rec.Values = map[string]json.Value{"messages": history}
		return th, slices.Clip(th.historyNodes())
	}
	b.Run("kept", func(b *testing.B) {
		th, nodes := cached()
		b.ReportAllocs()
		for b.Loop() {
			th.rec.Values["messages"], th.history = history, historyCache{history, nodes}
			th.appendMessages(add)
			_ = th.historyNodes()
		}
	})
	// A backend's snapshot: the history with one more message, in new
	// bytes (what an agent upstream's values event stores at every run).
	grown := snapshotOf(history, add)
	b.Run("snapshot", func(b *testing.B) {
		th, nodes := cached()
		b.ReportAllocs()
		for b.Loop() {
			th.rec.Values["messages"], th.history = grown, historyCache{history, nodes}
			_ = th.historyNodes()
		}
	})
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = historyNode(decodeHistory(history))
		}
	})
}

func decodeHistory(raw json.Value) []json.Value {
	var msgs []json.Value
	_ = stdjson.Unmarshal(raw, &msgs)
	return msgs
}
