package metrics

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// collectOne returns the histogram of h's only series.
func collectOne(t *testing.T, h *TallyHistogram) *dto.Histogram {
	t.Helper()
	ch := make(chan prometheus.Metric, 4)
	h.Collect(ch)
	close(ch)
	var out []*dto.Histogram
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.GetHistogram())
	}
	if len(out) != 1 {
		t.Fatalf("%d series, want 1", len(out))
	}
	return out[0]
}

// Whatever the values (below, on and between the bounds, past the last)
// and however they are split among tallies and flushed, the flushed
// histogram is the one a prometheus.Histogram fed the same values
// exposes: the same cumulative buckets and count, the same sum up to the
// order of the additions.
func TestTallyMatchesPrometheusHistogram(t *testing.T) {
	bounds := prometheus.ExponentialBuckets(50e-6, 2, 18)
	for c := range 100 {
		rng := rand.New(rand.NewPCG(uint64(c), 3))
		h := NewTallyHistogram("x", "x", bounds)
		ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: bounds})
		tallies := make([]Tally, 1+rng.IntN(4))
		for i := range tallies {
			tallies[i] = h.Series("fe", "be").Tally()
		}
		for range rng.IntN(1000) {
			var v float64
			switch rng.IntN(4) {
			case 0:
				v = bounds[rng.IntN(len(bounds))] // on a bound: counts in it
			case 1:
				v = 0
			case 2:
				v = 20 * rng.Float64() // past the last bound, at times
			default:
				v = rng.Float64() * 0.01
			}
			ref.Observe(v)
			tl := &tallies[rng.IntN(len(tallies))]
			tl.Observe(v)
			if rng.IntN(50) == 0 {
				tl.Flush()
			}
		}
		for i := range tallies {
			tallies[i].Flush()
		}
		var want dto.Metric
		if err := ref.Write(&want); err != nil {
			t.Fatal(err)
		}
		got, wh := collectOne(t, h), want.GetHistogram()
		if got.GetSampleCount() != wh.GetSampleCount() {
			t.Fatalf("case %d: count %d, want %d", c, got.GetSampleCount(), wh.GetSampleCount())
		}
		if math.Abs(got.GetSampleSum()-wh.GetSampleSum()) > 1e-9*math.Max(1, wh.GetSampleSum()) {
			t.Fatalf("case %d: sum %v, want %v", c, got.GetSampleSum(), wh.GetSampleSum())
		}
		if len(got.GetBucket()) != len(wh.GetBucket()) {
			t.Fatalf("case %d: %d buckets, want %d", c, len(got.GetBucket()), len(wh.GetBucket()))
		}
		for i, b := range wh.GetBucket() {
			g := got.GetBucket()[i]
			if g.GetUpperBound() != b.GetUpperBound() || g.GetCumulativeCount() != b.GetCumulativeCount() {
				t.Fatalf("case %d: bucket le=%v holds %d, want le=%v %d", c, g.GetUpperBound(), g.GetCumulativeCount(), b.GetUpperBound(), b.GetCumulativeCount())
			}
		}
	}
}

// A tally adds to its series every TallyFlush observations and on Flush,
// not before; a tally without a series flushes nothing.
func TestTallyFlushes(t *testing.T) {
	h := NewTallyHistogram("x", "x", []float64{1, 2})
	tl := h.Series("fe", "be").Tally()
	for range TallyFlush - 1 {
		tl.Observe(1.5)
	}
	if n := collectOne(t, h).GetSampleCount(); n != 0 {
		t.Fatalf("%d observations seen before the tally flushed", n)
	}
	tl.Observe(1.5)
	if n := collectOne(t, h).GetSampleCount(); n != TallyFlush {
		t.Fatalf("%d observations seen, want %d", n, TallyFlush)
	}
	tl.Observe(3)
	tl.Flush()
	tl.Flush()
	got := collectOne(t, h)
	if got.GetSampleCount() != TallyFlush+1 || got.GetSampleSum() != 1.5*TallyFlush+3 || got.GetBucket()[1].GetCumulativeCount() != TallyFlush {
		t.Fatalf("after Flush: %v", got)
	}
	var zero Tally
	zero.Flush()
}

// Tallies on many goroutines add up, and a scrape meanwhile always sees
// a histogram whose +Inf bucket is its count.
func TestTalliesConcurrently(t *testing.T) {
	h := NewTallyHistogram("x", "x", []float64{0.5})
	const goroutines, each = 4, 10_000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tl := h.Series("fe", "be").Tally()
			for i := range each {
				tl.Observe(float64((g + i) % 2))
			}
			tl.Flush()
		}()
	}
	for range 20 {
		ch := make(chan prometheus.Metric, 1)
		h.Collect(ch)
		close(ch)
		for m := range ch {
			var d dto.Metric
			if err := m.Write(&d); err != nil {
				t.Fatal(err)
			}
			if b := d.GetHistogram().GetBucket(); len(b) != 1 || b[0].GetCumulativeCount() > d.GetHistogram().GetSampleCount() {
				t.Fatalf("inconsistent scrape: %v", d.GetHistogram())
			}
		}
	}
	wg.Wait()
	got := collectOne(t, h)
	if got.GetSampleCount() != goroutines*each || got.GetBucket()[0].GetCumulativeCount() != goroutines*each/2 || got.GetSampleSum() != goroutines*each/2 {
		t.Fatalf("got %v", got)
	}
}

func BenchmarkTallyObserve(b *testing.B) {
	h := NewTallyHistogram("x", "x", prometheus.ExponentialBuckets(50e-6, 2, 18))
	b.RunParallel(func(pb *testing.PB) {
		tl := h.Series("fe", "be").Tally()
		v := 0.0
		for pb.Next() {
			v += 1e-6
			tl.Observe(v)
		}
		tl.Flush()
	})
}

func BenchmarkPrometheusObserve(b *testing.B) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)})
	b.RunParallel(func(pb *testing.PB) {
		v := 0.0
		for pb.Next() {
			v += 1e-6
			h.Observe(v)
		}
	})
}
