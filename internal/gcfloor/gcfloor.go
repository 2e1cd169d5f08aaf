// Package gcfloor keeps the Go garbage collector from running while the
// heap is small: it raises the GOGC percent so that the heap goal is at
// least a floor, and lowers it back to GOGC's own as the live heap grows.
//
// Why: a bridge's live heap is small (tens of MiB: buffers, thread records,
// the replay log's block cache) while every delta it forwards allocates,
// so with GOGC's goal of twice the live heap the collector ran about twice
// a second at 10,000 deltas/s. Each cycle held deltas back for its mark
// phase (assists, the fractional worker, the stops of the world): in a
// trace of the evergreen pair every cluster of late deltas, up to 18 ms,
// fell on a GC cycle, and they made the p99 of the added latency. With the
// goal at a floor the collector runs a few times less often and spends
// the same work per cycle, so far fewer deltas meet one.
//
// The floor costs memory only while the live heap is below half of it: at
// most the floor, in garbage not yet collected. A process whose live heap
// is above the floor collects as GOGC says. GOGC=off and GOMEMLIMIT keep
// their meaning: off disables the floor, a memory limit still bounds the
// heap.
package gcfloor

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// A tuner adjusts the GC percent after each collection. It learns of one
// by polling the runtime's cycle count, soon after a cycle and less often
// as time passes without one (see wait).
//
// Why not a cleanup on an object each cycle finds unreachable, as it
// first did: a cleanup runs once the sweeper reaches its object's span,
// and the background sweeper yields to every other goroutine, so in a
// busy process it ran as the next cycle began. Each cycle's goal then came
// from the live heap of the cycle before: a small heap's percent applied
// to a large one. In the triton bench the goal swung between the 128 MiB
// floor and 177-199 MiB, and the scavenger gave the difference back to the
// OS each time, to be faulted in again: 28% of that bench's page faults,
// and 25-50 MiB of its peak RSS.
// TestGoalFollowsEachCycle shows it.
type tuner struct {
	floor uint64
	base  int // GOGC's percent, restored by stop

	mu      sync.Mutex
	cur     int
	stopped bool
	samples []metrics.Sample

	quit chan struct{} // closed by stop
	done chan struct{} // closed when poll returns
}

// The bounds of the poll interval: soon after a cycle, and at most once a
// second in a process that does not collect (an idle daemon collects every
// two minutes).
const (
	pollMin = 2 * time.Millisecond
	pollMax = time.Second
)

// active is the running tuner: the GC percent is the process's, so there
// is at most one.
var (
	activeMu sync.Mutex
	active   *tuner
)

// Start keeps the heap goal at floor bytes or more until stop is called,
// which restores the GC percent Start found. A floor ≤ 0, GOGC=off, or a
// floor already started in the process (a server run in process twice,
// say) makes Start a no-op.
func Start(floor int64) (stop func()) {
	activeMu.Lock()
	defer activeMu.Unlock()
	base := gogc()
	if floor <= 0 || base < 0 || active != nil {
		return func() {}
	}
	t := &tuner{floor: uint64(floor), base: base, cur: base, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}, quit: make(chan struct{}), done: make(chan struct{})}
	count := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	if metrics.Read(count); count[0].Value.Kind() != metrics.KindUint64 || !t.adjust() {
		return func() {} // a runtime without the metrics: GOGC alone
	}
	active = t
	go t.poll(count)
	return t.stop
}

// gogc reads the GC percent (GOGC's, or SetGCPercent's; -1: off) without
// setting it, as SetGCPercent's return would.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1 // a runtime without it: leave the GC alone
	}
	return int(int32(s[0].Value.Uint64())) // the runtime holds an int32: off is -1
}

// poll adjusts the percent each time count, the sample of the cycle
// count, moves, until stop.
func (t *tuner) poll(count []metrics.Sample) {
	defer close(t.done)
	seen, since := count[0].Value.Uint64(), time.Now()
	timer := time.NewTimer(pollMin)
	defer timer.Stop()
	for {
		select {
		case <-t.quit:
			return
		case <-timer.C:
		}
		if n := cycles(count); n != seen {
			seen, since = n, time.Now()
			t.adjust()
		}
		timer.Reset(wait(time.Since(since)))
	}
}

// cycles reads the count of completed GC cycles into s.
func cycles(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// wait is the poll interval some time after the last cycle seen: a
// sixteenth of it, so that a cycle is seen within about 6% of the time
// between two (the heap grows meanwhile at the percent of the cycle
// before), between pollMin and pollMax. A process collecting every 250 ms
// polls some 50 times a cycle (each a metrics read, about a microsecond);
// an idle one about once a second.
func wait(since time.Duration) time.Duration {
	return min(max(since/16, pollMin), pollMax)
}

// adjust sets the percent for the live heap the last cycle found, and
// reports whether the runtime has the metrics it reads.
func (t *tuner) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return true
	}
	metrics.Read(t.samples)
	for _, m := range t.samples {
		if m.Value.Kind() != metrics.KindUint64 {
			return false
		}
	}
	if p := Percent(t.floor, t.base, t.samples[0].Value.Uint64(), t.samples[1].Value.Uint64()+t.samples[2].Value.Uint64()); p != t.cur {
		debug.SetGCPercent(p)
		t.cur = p
	}
	return true
}

// stop ends the polling and restores GOGC's percent.
func (t *tuner) stop() {
	activeMu.Lock()
	defer activeMu.Unlock()
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	t.stopped = true
	debug.SetGCPercent(t.base)
	active = nil
	t.mu.Unlock()
	close(t.quit)
	<-t.done
}

// heapMinimum is the runtime's smallest heap goal at GOGC=100 (its
// defaultHeapMinimum). The runtime scales it with the percent, so a
// percent above floor/heapMinimum×100 would put the goal above the floor
// whatever the live heap: a tiny heap's percent is capped there.
const heapMinimum = 4 << 20

// Percent is the GC percent that puts the heap goal at floor or more:
// the runtime's goal is live + (live + roots) × percent / 100, where
// roots are the scannable stacks and globals, and at least heapMinimum ×
// percent / 100. It is never below base, and never above the percent
// whose minimum goal is the floor.
func Percent(floor uint64, base int, live, roots uint64) int {
	if live >= floor {
		return base
	}
	scan := max(live+roots, 1)
	need := (floor - live) * 100 / scan
	if (floor-live)*100%scan != 0 {
		need++ // round up: the goal reaches the floor
	}
	return int(max(min(need, floor*100/heapMinimum), uint64(base)))
}
