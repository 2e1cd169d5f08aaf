package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
)

// testThread returns a thread with a buffer of n events, outside any
// frontend's map.
func testThread(t *testing.T, n int) *Thread {
	t.Helper()
	f, err := NewFrontend(Config{Runner: nopRunner{}, BufferEvents: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return newThread(f, "t")
}

// add appends count events of method on namespace ns.
func add(th *Thread, count int, method string, ns ...string) {
	th.mu.Lock()
	defer th.mu.Unlock()
	for range count {
		data := []byte(`{"event":"running"}`)
		if method == methodValues {
			data = []byte(`{"n":` + strconv.FormatUint(th.seq+1, 10) + `}`)
		}
		th.appendLocked(&wireEvent{method: method, namespace: ns, timeMs: 1, data: data, status: "running"}, "run-1")
	}
}

func all(*record) bool { return true }

func seqs(recs []record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.seq
	}
	return out
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// drain reads everything after the reader's cursor.
func drain(th *Thread, r *reader) ([]record, []*gap) {
	var out []record
	var gaps []*gap
	for {
		n := len(out)
		var g *gap
		out, g = th.read(r, all, 7, out)
		if g != nil {
			gaps = append(gaps, g)
		}
		if len(out) == n && g == nil {
			return out, gaps
		}
	}
}

func TestReplaySinceThenLive(t *testing.T) {
	th := testThread(t, 2000)
	add(th, 1000, methodLifecycle)
	r, first, g := th.attach(500, true, nil)
	if g != nil || len(first) != 0 {
		t.Fatalf("attach: gap %v, first %v", g, first)
	}
	got, gaps := drain(th, r)
	if len(gaps) != 0 || !slices.Equal(seqs(got), span(501, 1000)) {
		t.Fatalf("replay after since=500: %d events from %v, gaps %v", len(got), seqs(got)[:min(3, len(got))], gaps)
	}
	add(th, 5, methodLifecycle)
	got, _ = drain(th, r)
	if !slices.Equal(seqs(got), span(1001, 1005)) {
		t.Fatalf("live after replay: %v", seqs(got))
	}
	for _, rec := range got {
		var env struct {
			EventID string `json:"event_id"`
			Seq     uint64 `json:"seq"`
		}
		if err := json.Unmarshal(rec.frame, &env); err != nil || env.Seq != rec.seq || env.EventID != strconv.FormatUint(rec.seq, 10) {
			t.Fatalf("frame %s: seq/event_id do not match %d (%v)", rec.frame, rec.seq, err)
		}
	}
}

func TestReplayGapPinsLatestValues(t *testing.T) {
	th := testThread(t, 100)
	add(th, 59, methodMessages)  // seq 1..59
	add(th, 1, methodValues)     // seq 60: the state
	add(th, 190, methodMessages) // seq 61..250: seq 60 is evicted, but pinned
	r, first, g := th.attach(50, true, nil)
	if g == nil || g.since != 50 || g.minAvail != 151 {
		t.Fatalf("gap = %+v, want since 50, min 151", g)
	}
	if !slices.Equal(seqs(first), []uint64{60}) {
		t.Fatalf("pinned values first = %v, want [60]", seqs(first))
	}
	if _, first, _ := th.attach(60, true, nil); len(first) != 0 {
		t.Fatalf("a reader that has seen the state gets it again: %v", seqs(first))
	}
	got, _ := drain(th, r)
	if !slices.Equal(seqs(got), span(151, 250)) {
		t.Fatalf("replay from the oldest: %v..", seqs(got)[:3])
	}
	// Without since: the pinned state, then the whole ring.
	r2, first, g := th.attach(0, false, nil)
	got, _ = drain(th, r2)
	if g != nil || !slices.Equal(seqs(first), []uint64{60}) || !slices.Equal(seqs(got), span(151, 250)) {
		t.Fatalf("full replay: gap %v first %v got %d", g, seqs(first), len(got))
	}
	// A newer state replaces the pinned one.
	add(th, 1, methodValues)
	r3, first, _ := th.attach(0, false, nil)
	got, _ = drain(th, r3)
	if len(first) != 0 || got[len(got)-1].seq != 251 {
		t.Fatalf("after a newer values event: first %v last %d", seqs(first), got[len(got)-1].seq)
	}
}

func TestReaderLagReportsGap(t *testing.T) {
	th := testThread(t, 10)
	r, _, _ := th.attach(0, false, nil)
	add(th, 25, methodMessages)
	got, gaps := drain(th, r)
	if len(gaps) != 1 || gaps[0].since != 0 || gaps[0].minAvail != 16 || !slices.Equal(seqs(got), span(16, 25)) {
		t.Fatalf("lagging reader: gaps %+v got %v", gaps, seqs(got))
	}
}

// TestConcurrentAppendRead checks, under -race, that a reader attached while
// events are appended sees each event once, in order, with no gap.
func TestConcurrentAppendRead(t *testing.T) {
	th := testThread(t, 100_000)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 2000 {
			add(th, 1, methodMessages)
		}
	}()
	add(th, 10, methodMessages)
	r, _, _ := th.attach(3, true, nil)
	var got []record
	for len(got) < 2007 {
		n := len(got)
		var g *gap
		got, g = th.read(r, all, 64, got)
		if g != nil {
			t.Fatal("unexpected gap")
		}
		if len(got) == n {
			<-r.wake
		}
	}
	wg.Wait()
	if !slices.Equal(seqs(got), span(4, 2010)) {
		t.Fatalf("got %d events", len(got))
	}
}

func TestFilterMatch(t *testing.T) {
	rec := func(method, custom string, ns ...string) *record {
		return &record{method: method, custom: custom, ns: ns}
	}
	cases := []struct {
		filter string
		rec    *record
		want   bool
	}{
		{`{"channels":["messages"]}`, rec(methodMessages, ""), true},
		{`{"channels":["messages"]}`, rec(methodTools, ""), false},
		{`{"channels":["input"]}`, rec(methodInputRequested, ""), true},
		{`{"channels":["input"]}`, rec(methodInputAnswered, ""), true},
		{`{"channels":["custom"]}`, rec(methodCustom, "progress"), true},
		{`{"channels":["custom:progress"]}`, rec(methodCustom, "progress"), true},
		{`{"channels":["custom:progress"]}`, rec(methodCustom, "other"), false},
		{`{"channels":["custom:progress"]}`, rec(methodCustom, ""), false},
		// rule 2: no namespaces: all, depth ignored
		{`{"channels":["messages"],"depth":0}`, rec(methodMessages, "", "a", "b", "c"), true},
		// rule 3: prefix with segment normalisation
		{`{"channels":["messages"],"namespaces":[["fetcher"]]}`, rec(methodMessages, "", "fetcher:uuid-1"), true},
		{`{"channels":["messages"],"namespaces":[["fetcher:abc"]]}`, rec(methodMessages, "", "fetcher:uuid-1"), false},
		{`{"channels":["messages"],"namespaces":[["fetcher:abc"]]}`, rec(methodMessages, "", "fetcher:abc", "x"), true},
		{`{"channels":["messages"],"namespaces":[["a"]],"depth":1}`, rec(methodMessages, "", "a", "b"), true},
		{`{"channels":["messages"],"namespaces":[["a"]],"depth":1}`, rec(methodMessages, "", "a", "b", "c"), false},
		{`{"channels":["messages"],"namespaces":[["a"]],"depth":0}`, rec(methodMessages, "", "a"), true},
		// rule 4: root events do not match a non-root prefix
		{`{"channels":["lifecycle"],"namespaces":[["gp_two"]]}`, rec(methodLifecycle, ""), false},
		{`{"channels":["lifecycle"],"namespaces":[[],["gp_two"]]}`, rec(methodLifecycle, ""), true},
		{`{"channels":["lifecycle"],"namespaces":[[]],"depth":0}`, rec(methodLifecycle, "", "child"), false},
	}
	for i, c := range cases {
		p, _ := parseParams([]byte(c.filter))
		f, pe := parseFilter(p, "test")
		if pe != nil {
			t.Fatalf("%d: %v", i, pe)
		}
		if got := f.match(c.rec); got != c.want {
			t.Errorf("%d: %s on %s %v: got %v", i, c.filter, c.rec.method, c.rec.ns, got)
		}
	}
}

func TestFilterErrorsNameTheField(t *testing.T) {
	for body, want := range map[string]string{
		`{}`:                                "requires a non-empty channels array",
		`{"channels":[]}`:                   "requires a non-empty channels array",
		`{"channels":"messages"}`:           "channels must be an array of strings",
		`{"channels":["messages","bogus"]}`: `channels[1] "bogus" is an unsupported channel`,
		`{"channels":["custom:"]}`:          `channels[0] "custom:" is an unsupported channel`,
		`{"channels":["messages"],"namespaces":[1]}`: "namespaces must be an array of namespaces",
		`{"channels":["messages"],"depth":-1}`:       "depth must be a non-negative integer",
		`{"channels":["messages"],"depth":true}`:     "depth must be a non-negative integer",
		`{"channels":["messages"],"depth":1.5}`:      "depth must be a non-negative integer",
	} {
		p, _ := parseParams([]byte(body))
		_, pe := parseFilter(p, "subscription.subscribe")
		if pe == nil || pe.Code != errInvalidArgument || !strings.Contains(pe.Message, want) {
			t.Errorf("%s: got %v, want invalid_argument with %q", body, pe, want)
		}
	}
}

// nopRunner routes nothing.
type nopRunner struct{}

func (nopRunner) Run(context.Context, *canonical.Request) (canonical.Stream, error) {
	return nil, canonical.Errorf(canonical.CodeNotFound, "no targets")
}
func (nopRunner) Target(string) (canonical.TargetInfo, bool) { return canonical.TargetInfo{}, false }
func (nopRunner) Targets() []canonical.TargetInfo            { return nil }

func TestCamelCaseAliases(t *testing.T) {
	p, ok := parseParams([]byte(`{"assistantId":"a","interruptId":"i","interrupt_id":"snake","multitaskStrategy":"reject"}`))
	if !ok {
		t.Fatal("not parsed")
	}
	for k, want := range map[string]string{"assistant_id": "a", "interrupt_id": "snake", "multitask_strategy": "reject"} {
		if got, _, _ := p.str(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}
