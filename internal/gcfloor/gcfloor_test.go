package gcfloor

import (
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Percent puts the runtime's goal at the floor or just above it: its
// formula, live + (live+roots)×p/100, reaches the floor, or its minimum,
// 4 MiB×p/100, is the floor (then the formula is below it); one percent
// less would fall short. It never gives less than base.
func TestPercent(t *testing.T) {
	goal := func(p int, live, roots uint64) uint64 {
		return max(live+(live+roots)*uint64(p)/100, heapMinimum*uint64(p)/100)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		floor := heapMinimum + rng.Uint64N(1<<34)
		live := rng.Uint64N(1 << 34)
		roots := rng.Uint64N(1 << 24)
		base := 50 + rng.IntN(200)
		p := Percent(floor, base, live, roots)
		switch {
		case p < base:
			t.Fatalf("Percent(%d, %d, %d, %d) = %d, below base", floor, base, live, roots, p)
		case live >= floor && p != base:
			t.Fatalf("Percent(%d, %d, %d, %d) = %d: the live heap is above the floor, want base", floor, base, live, roots, p)
		case p == base:
		case goal(p, live, roots) < floor-heapMinimum/100:
			t.Fatalf("Percent(%d, %d, %d, %d) = %d: goal %d below the floor", floor, base, live, roots, p, goal(p, live, roots))
		case goal(p-1, live, roots) >= floor:
			t.Fatalf("Percent(%d, %d, %d, %d) = %d: %d already reaches the floor", floor, base, live, roots, p, p-1)
		}
	}
	if p := Percent(128<<20, 100, 0, 0); p != 3200 {
		t.Fatalf("Percent for an empty heap = %d, want 3200, whose minimum goal is the 128 MiB floor", p)
	}
}

func heapGoal() uint64 { return readMetric("/gc/heap/goal:bytes") }

func readMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// awaitGoal collects until the heap goal satisfies ok (the tuner adjusts
// after a cycle, when its poll sees the cycle count move).
func awaitGoal(t *testing.T, what string, ok func(uint64) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		if g := heapGoal(); ok(g) {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("heap goal %d MiB: %s", g>>20, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// With a floor the goal of a small heap stays at the floor across
// collections; stop restores GOGC's percent and with it the small goal.
func TestStartRaisesTheGoalToTheFloor(t *testing.T) {
	const floor = 256 << 20
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	awaitGoal(t, "want a goal below the floor before Start", func(g uint64) bool { return g < floor })
	stop := Start(floor)
	atFloor := func(g uint64) bool { return g >= floor && g < 2*floor } // the heap is small: about the floor, not more
	awaitGoal(t, "want the floor after Start", atFloor)
	for range 3 { // it stays there, cycle after cycle
		awaitGoal(t, "want the floor to hold", atFloor)
	}
	stop()
	if p := gogc(); p != 100 {
		t.Fatalf("GC percent after stop = %d, want 100 restored", p)
	}
	awaitGoal(t, "want GOGC's goal back after stop", func(g uint64) bool { return g < floor })
}

// startAfterGC starts a floor at GOGC=100 after a collection, and stops
// it and restores the percent when the test ends.
func startAfterGC(t *testing.T, floor int64) {
	base := debug.SetGCPercent(100)
	runtime.GC()
	stop := Start(floor)
	t.Cleanup(func() { stop(); debug.SetGCPercent(base) })
}

// A live heap above the floor is collected as GOGC says: the percent the
// first adjustment raised (the heap was small then) comes back to GOGC's.
func TestStartLeavesALargeHeapAlone(t *testing.T) {
	const floor = 8 << 20
	startAfterGC(t, floor)
	if p := gogc(); p <= 100 {
		t.Fatalf("GC percent with a small heap = %d, want it raised to the %d MiB floor", p, floor>>20)
	}
	live := make([]byte, 32<<20)
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GC percent with %d MiB live over an %d MiB floor = %d, want 100", len(live)>>20, floor>>20, gogc())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	runtime.KeepAlive(live)
}

// GOGC=off is the operator's choice: Start leaves it.
func TestStartKeepsGCOff(t *testing.T) {
	base := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(base)
	stop := Start(256 << 20)
	runtime.GC()
	time.Sleep(10 * time.Millisecond) // a poll would have run
	stop()
	if p := gogc(); p != -1 {
		t.Fatalf("GC percent = %d, want -1 (off) left alone", p)
	}
}

// A second floor while one runs is a no-op: the first keeps the percent,
// and stopping the second leaves it alone.
func TestStartTwice(t *testing.T) {
	const floor = 256 << 20
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	stop1 := Start(floor)
	raised := gogc()
	stop2 := Start(16 << 20)
	stop2()
	if p := gogc(); p != raised {
		t.Fatalf("GC percent after a second Start and its stop = %d, want the first floor's %d", p, raised)
	}
	stop1()
	if p := gogc(); p != 100 {
		t.Fatalf("GC percent after stop = %d, want 100", p)
	}
	stop3 := Start(floor) // the first has stopped: this one runs
	defer stop3()
	if p := gogc(); p <= 100 {
		t.Fatalf("GC percent after a new Start = %d, want it raised", p)
	}
}

// Each cycle's goal comes from that cycle's live heap, not the one before:
// with the live heap swinging between small and large from one natural
// cycle to the next, and the process busy allocating, the goal each cycle
// ran to stays near the floor. A tuner one cycle late (as a cleanup was,
// waiting on a background sweeper that a busy process starves) applies a
// small heap's percent to a large heap, several times the floor, and a
// large heap's to a small one, a fraction of it: most cycles are off.
func TestGoalFollowsEachCycle(t *testing.T) {
	const floor = 64 << 20
	startAfterGC(t, floor)

	quit := make(chan struct{})
	var churn sync.WaitGroup
	var live atomic.Pointer[[]byte] // swapped between 2 and 24 MiB each cycle
	// More busy goroutines than Ps, allocating some 200 MB/s each: a cycle
	// every 100 ms or so, and a background sweeper left little time.
	for range runtime.GOMAXPROCS(0) + 1 {
		churn.Go(func() {
			var sink []byte
			x := uint64(1)
			for {
				select {
				case <-quit:
					runtime.KeepAlive(sink)
					return
				default:
				}
				sink = make([]byte, 4<<10) // garbage: cycles come of it
				for range 20_000 {         // and work between allocations
					x = x*6364136223846793005 + 1442695040888963407
				}
				sink[0] = byte(x)
			}
		})
	}
	defer func() { close(quit); churn.Wait() }()

	// ranTo is the goal each cycle started with: the last goal sampled
	// before the cycle count moved by one.
	var ranTo []uint64
	cycles := readMetric("/gc/cycles/total:gc-cycles")
	goal := heapGoal()
	deadline := time.Now().Add(20 * time.Second)
	for len(ranTo) < 20 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
		n := readMetric("/gc/cycles/total:gc-cycles")
		if n == cycles {
			goal = heapGoal()
			continue
		}
		if n == cycles+1 {
			ranTo = append(ranTo, goal)
		}
		cycles = n
		size := 2 << 20
		if len(ranTo)%2 == 1 {
			size = 24 << 20
		}
		b := make([]byte, size)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		live.Store(&b)
		goal = heapGoal()
	}
	if len(ranTo) < 10 {
		t.Skipf("saw %d cycles one at a time in 20 s: this machine is too loaded to tell", len(ranTo))
	}
	off := 0
	for _, g := range ranTo {
		if g > 2*floor || g < floor/2 {
			off++
		}
	}
	// A poll late behind busy goroutines may let a cycle or two begin at
	// the percent before: a tuner one cycle late is off at most cycles.
	if off > len(ranTo)/4 {
		t.Fatalf("goals cycles ran to (MiB): %v; %d of %d off the %d MiB floor by 2× or more", mib(ranTo), off, len(ranTo), floor>>20)
	}
	t.Logf("goals cycles ran to (MiB): %v", mib(ranTo))
}

func mib(v []uint64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = x >> 20
	}
	return out
}
