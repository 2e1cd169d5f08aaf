package metrics

import (
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// TallyHistogram is a histogram by frontend and backend that its
// observers feed through a Tally: counts kept by the observer and added
// to the shared series every TallyFlush observations and when it is done.
// It is for a figure observed per text delta. A prometheus.Histogram
// shared by every run of a frontend:backend pair takes atomic adds on the
// same memory from every core at each observation: 80 ns an observation
// with two cores observing, against 29 ns with one, and 2% of an unpaced
// Triton bridge's CPU. A scrape sees a running tally up to TallyFlush-1
// observations late; the exposition is an ordinary histogram.
type TallyHistogram struct {
	desc   *prometheus.Desc
	bounds []float64 // bucket upper bounds, ascending; +Inf is implied
	mu     sync.Mutex
	series map[[2]string]*TallySeries
}

// TallySeries is one frontend:backend pair's series.
type TallySeries struct {
	h      *TallyHistogram
	labels [2]string
	counts []atomic.Uint64 // per bucket, not cumulative; the last is +Inf's
	sum    atomic.Uint64   // float64 bits
}

// TallyFlush is how many observations a Tally keeps before adding them
// to its series.
const TallyFlush = 64

// NewTallyHistogram returns a histogram with labels frontend and backend.
func NewTallyHistogram(name, help string, bounds []float64) *TallyHistogram {
	return &TallyHistogram{
		desc:   prometheus.NewDesc(name, help, []string{"frontend", "backend"}, nil),
		bounds: slices.Clone(bounds),
		series: map[[2]string]*TallySeries{},
	}
}

// Series returns the pair's series, created on first use.
func (h *TallyHistogram) Series(frontend, backend string) *TallySeries {
	k := [2]string{frontend, backend}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[k]
	if s == nil {
		s = &TallySeries{h: h, labels: k, counts: make([]atomic.Uint64, len(h.bounds)+1)}
		h.series[k] = s
	}
	return s
}

// Describe implements prometheus.Collector.
func (h *TallyHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect implements prometheus.Collector. The count is the buckets' sum,
// so that the +Inf bucket equals it whatever flushes run meanwhile.
func (h *TallyHistogram) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	all := make([]*TallySeries, 0, len(h.series))
	for _, s := range h.series {
		all = append(all, s)
	}
	h.mu.Unlock()
	for _, s := range all {
		buckets := make(map[float64]uint64, len(h.bounds))
		var n uint64
		for i, b := range h.bounds {
			n += s.counts[i].Load()
			buckets[b] = n
		}
		n += s.counts[len(h.bounds)].Load()
		ch <- prometheus.MustNewConstHistogram(h.desc, n, math.Float64frombits(s.sum.Load()), buckets, s.labels[0], s.labels[1])
	}
}

// Tally is one observer's pending observations of a series. It belongs
// to one goroutine. Its zero value has no series: Flush does nothing and
// Observe must not be called.
type Tally struct {
	s      *TallySeries
	counts []uint32
	n      int
	sum    float64
}

// Tally returns an empty tally of s (its counts are allocated by the
// first Observe: a run that sees no second delta allocates nothing).
func (s *TallySeries) Tally() Tally { return Tally{s: s} }

// Observe records v (a value ≤ a bucket's bound counts in it, as
// Prometheus's le says).
func (t *Tally) Observe(v float64) {
	if t.counts == nil {
		t.counts = make([]uint32, len(t.s.counts))
	}
	t.counts[sort.SearchFloat64s(t.s.h.bounds, v)]++
	t.sum += v
	if t.n++; t.n == TallyFlush {
		t.Flush()
	}
}

// Flush adds the pending observations to the series.
func (t *Tally) Flush() {
	if t.n == 0 {
		return
	}
	for i, c := range t.counts {
		if c != 0 {
			t.s.counts[i].Add(uint64(c))
			t.counts[i] = 0
		}
	}
	for {
		old := t.s.sum.Load()
		if t.s.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+t.sum)) {
			break
		}
	}
	t.n, t.sum = 0, 0
}
