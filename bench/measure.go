package bench

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/interlingua-dev/interlingua/bench/load"
)

// now is the harness's clock (load.Now): nanoseconds since its epoch,
// monotonic, the clock of every stamp and record.
func now() int64 { return load.Now() }

// percentile returns the p-th percentile (0..100) of sorted v, 0 if empty.
func percentile(sorted []int64, p int) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := len(sorted) * p / 100
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func sortedCopy(v []int64) []int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}

// cpuTime is a process's user+system CPU time; pid 0 is self.
func cpuTime(pid int) time.Duration {
	if pid != 0 {
		return childCPU(pid)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatus reads VmRSS and VmHWM (bytes) of a process; pid 0 is self.
func procStatus(pid int) (rss, hwm int64) {
	path := "/proc/self/status"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			rss = kbField(line[6:])
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			hwm = kbField(line[6:])
		}
	}
	return rss, hwm
}

func kbField(b []byte) int64 {
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(string(f[0]), 10, 64)
	return n << 10
}

// rssSampler records the peak VmRSS of a process while it runs.
type rssSampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}
	peak int64
}

// sampleRSS starts sampling every 10 ms until stop is called.
func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	s.peak, _ = procStatus(pid)
	go s.loop()
	return s
}

func (s *rssSampler) loop() {
	defer close(s.done)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if r, _ := procStatus(s.pid); r > s.peak {
				s.peak = r
			}
		}
	}
}

// finish stops the sampler and returns the peak, including a last sample.
func (s *rssSampler) finish() int64 {
	close(s.stop)
	<-s.done
	if r, _ := procStatus(s.pid); r > s.peak {
		s.peak = r
	}
	return s.peak
}

// memCounters are the heap allocation counters.
type memCounters struct{ mallocs, bytes uint64 }

func readMem() memCounters {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memCounters{m.Mallocs, m.TotalAlloc}
}

// loadAvg returns /proc/loadavg's first three fields.
func loadAvg() [3]float64 {
	var out [3]float64
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	f := bytes.Fields(data)
	for i := 0; i < 3 && i < len(f); i++ {
		out[i], _ = strconv.ParseFloat(string(f[i]), 64)
	}
	return out
}

// raiseNoFile raises the soft open-files limit to the hard limit and
// returns the resulting soft limit.
func raiseNoFile() (soft, hard uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	// Set it even when already raised (the Go runtime raises it at start
	// but restores the original for child processes unless the program
	// sets it itself).
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return rl.Cur, rl.Max, err
	}
	return rl.Cur, rl.Max, nil
}

// childCPU reads utime+stime of another process from /proc/pid/stat
// (clock ticks, 100 per second on Linux).
func childCPU(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name: state is field 3;
	// utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(string(f[11]), 10, 64)
	s, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// loopbackRTT measures n 64-byte TCP round trips on loopback, one every
// gap, and returns their p50 and p99 and the process CPU per round trip,
// in µs: the floor a paced stream's hop pays on this machine (goroutine
// and thread wake-ups included).
func loopbackRTT(n int, gap time.Duration) [3]float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return [3]float64{}
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return [3]float64{}
	}
	buf := make([]byte, 64)
	rtt := make([]int64, 0, n)
	c0 := cpuTime(0)
	for i := 0; i < n; i++ {
		time.Sleep(gap)
		t0 := now()
		if _, err := c.Write(buf); err != nil {
			break
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			break
		}
		rtt = append(rtt, now()-t0)
	}
	cpu := cpuTime(0) - c0 // the sleeps' timer wake-ups included
	c.Close()
	<-done
	slices.Sort(rtt)
	us := func(ns int64) float64 { return float64(ns/10) / 100 }
	return [3]float64{us(percentile(rtt, 50)), us(percentile(rtt, 99)), us(int64(cpu) / int64(max(len(rtt), 1)))}
}
