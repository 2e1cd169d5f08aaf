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
		exact := len(l.spans) < maxEvictSpans // nothing forgotten
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
				t.Fatalf("seed %d, %d events in %d spans, %s, (%d, %d): missed %d, want %d", seed, n, len(l.spans), fs, after, before, got, want)
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
