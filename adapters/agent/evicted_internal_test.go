package agent

import (
	"math/rand/v2"
	"testing"
)

// An evictLog's count of missed events is the brute-force count over the
// evicted records it was given: exact while its spans fit, and never
// under the exact count once they do not (seqs it forgot count as missed).
func TestEvictLogCountsMatchingEvents(t *testing.T) {
	methods := []string{methodMessages, methodLifecycle, methodValues, methodCustom}
	namespaces := [][]string{{}, {"a"}, {"a", "b"}, {"c"}}
	filters := []string{
		`{"channels":["lifecycle","values"]}`,
		`{"channels":["messages"],"namespaces":[["a"]]}`,
		`{"channels":["custom:x"]}`,
		`{"channels":["messages","lifecycle","values","custom"],"namespaces":[[]],"depth":0}`,
	}
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var l evictLog
		var recs []record
		n := 1 + rng.IntN(4*maxEvictSpans)
		for seq := uint64(1); seq <= uint64(n); seq++ {
			r := record{seq: seq, method: methods[rng.IntN(len(methods))], ns: namespaces[rng.IntN(len(namespaces))]}
			if r.method == methodCustom {
				r.custom = []string{"x", "y"}[rng.IntN(2)]
			}
			if rng.IntN(4) > 0 && len(recs) > 0 { // runs of alike events, as a run's deltas
				prev := recs[len(recs)-1]
				r.method, r.custom, r.ns = prev.method, prev.custom, prev.ns
			}
			recs = append(recs, r)
			l.add(&recs[len(recs)-1])
		}
		exact := len(l.kept()) < maxEvictSpans // nothing forgotten
		for _, fs := range filters {
			p, _ := parseParams([]byte(fs))
			f, pe := parseFilter(p, "test")
			if pe != nil {
				t.Fatal(pe)
			}
			after, before := uint64(rng.IntN(n)), uint64(1+rng.IntN(n+1))
			var want uint64
			for _, r := range recs {
				if r.seq > after && r.seq < before && f.match(&r) {
					want++
				}
			}
			got := l.missed(after, before, f.match)
			if (exact && got != want) || got < want {
				t.Fatalf("seed %d, %d events in %d spans, %s, (%d, %d): missed %d, want %d", seed, n, len(l.kept()), fs, after, before, got, want)
			}
		}
	}
}

// forgetFrom drops what a rebuilt buffer replaces: a count from there on
// is every seq.
func TestEvictLogForgetFrom(t *testing.T) {
	var l evictLog
	for seq := uint64(1); seq <= 10; seq++ {
		l.add(&record{seq: seq, method: methodMessages, ns: []string{}})
	}
	none := func(*record) bool { return false }
	if got := l.missed(0, 11, none); got != 0 {
		t.Fatalf("before: %d", got)
	}
	l.forgetFrom(6)
	if got := l.missed(0, 11, none); got != 5 {
		t.Fatalf("after forgetFrom(6): %d missed of seqs 6..10, want 5", got)
	}
}

// Past maxEvictSpans the log keeps exactly the newest spans, through the
// drops and compactions: events whose fields alternate (a span each)
// are counted exactly over the newest maxEvictSpans seqs and as missed
// before them.
func TestEvictLogKeepsTheNewestSpans(t *testing.T) {
	var l evictLog
	const n = 3*maxEvictSpans + maxEvictSpans/3
	for seq := uint64(1); seq <= n; seq++ {
		m := methodMessages
		if seq%2 == 0 {
			m = methodLifecycle
		}
		l.add(&record{seq: seq, method: m, ns: []string{}})
		if k := len(l.kept()); k != int(min(seq, maxEvictSpans)) {
			t.Fatalf("after seq %d: %d spans kept", seq, k)
		}
	}
	lifecycle := func(r *record) bool { return r.method == methodLifecycle }
	first := uint64(n - maxEvictSpans + 1) // the oldest seq still described
	if got, want := l.missed(first-1, n+1, lifecycle), uint64(maxEvictSpans/2); got != want {
		t.Errorf("over the kept seqs: %d missed, want %d", got, want)
	}
	if got, want := l.missed(0, first, lifecycle), first-1; got != want {
		t.Errorf("over the forgotten seqs: %d missed, want every one, %d", got, want)
	}
	if cap(l.spans) > 2*maxEvictSpans {
		t.Errorf("the log's array holds %d spans", cap(l.spans))
	}
}
