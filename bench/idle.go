package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/protocols"
)

// IdleOptions configure the idle-connections measurement.
type IdleOptions struct {
	// Conns is the number of idle streaming connections: half SSE, half
	// WebSocket, each half shared by the protocols whose Load.Idle has
	// that transport (see idlePlan). Default 10,000.
	Conns int
	// ActiveStreams run at once, while the idle connections stay open,
	// through the reference frontend from the scripted backend, each
	// ActiveDeltas deltas. Defaults 1,000 and 100; negative skips.
	ActiveStreams, ActiveDeltas int
	// Binary is the interlingua executable to start ("serve"). Default
	// this process's executable.
	Binary string
	// Dialers is how many connections are opened at once. Default 64.
	Dialers int
}

// IdleResult is the server process's footprint.
type IdleResult struct {
	Conns int `json:"conns"`
	// Idle are the connections open, by protocol, in the order planned.
	Idle         []IdleConns `json:"idle"`
	Failed       int         `json:"failed"`
	FirstFailure string      `json:"first_failure,omitempty"`
	NoFileSoft   uint64      `json:"nofile_soft"`
	NoFileHard   uint64      `json:"nofile_hard"`
	// BaselineRSS is the server's VmRSS before the connections, IdleRSS
	// with all of them open (after a settle), PerConnBytes the difference
	// per connection.
	BaselineRSS  int64 `json:"baseline_rss_bytes"`
	IdleRSS      int64 `json:"idle_rss_bytes"`
	PerConnBytes int64 `json:"per_conn_bytes"`
	Goroutines   int64 `json:"goroutines"`
	HeapInuse    int64 `json:"heap_inuse_bytes"`
	// StackInuse is the goroutine stacks' memory: with HeapInuse, what
	// the RSS per connection is made of.
	StackInuse int64 `json:"stack_inuse_bytes"`
	// Active is the active-stream load run with the idle connections
	// open (figures of the server process: RSS, CPU).
	Active *Side `json:"active,omitempty"`
	// ActiveStreams × ActiveDeltas is that load.
	ActiveStreams int `json:"active_streams"`
	ActiveDeltas  int `json:"active_deltas"`
	// HWM is the server's VmHWM at the end.
	HWM        int64      `json:"hwm_bytes"`
	LoadBefore [3]float64 `json:"loadavg_before"`
	LoadAfter  [3]float64 `json:"loadavg_after"`
}

// IdleConns are one protocol's idle connections.
type IdleConns struct {
	Protocol  string `json:"protocol"`
	Transport string `json:"transport"`
	Conns     int    `json:"conns"`
	// Text says what they are (Load.Idle.Text).
	Text string `json:"text"`
}

// Idle starts `interlingua serve` as a child process (so its RSS is the
// server's alone), opens the idle connections, reads the child's memory,
// then runs the active streams alongside them.
func Idle(ctx context.Context, o IdleOptions) (*IdleResult, error) {
	o.Conns = cmpOr(o.Conns, 10_000)
	if o.ActiveStreams == 0 {
		o.ActiveStreams = 1000
	}
	o.ActiveDeltas = cmpOr(o.ActiveDeltas, 100)
	o.Dialers = cmpOr(o.Dialers, 64)
	res := &IdleResult{Conns: o.Conns, LoadBefore: loadAvg()}
	var err error
	res.NoFileSoft, res.NoFileHard, err = raiseNoFile()
	if err != nil {
		return nil, fmt.Errorf("raising the open-files limit: %w", err)
	}
	need := uint64(o.Conns + max(o.ActiveStreams, 0) + 512)
	if res.NoFileHard < need {
		return nil, fmt.Errorf("open-files hard limit %d is below the %d this test needs (client and server each hold one descriptor per connection): raise it with ulimit -Hn", res.NoFileHard, need)
	}
	if o.Binary == "" {
		if o.Binary, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	child, err := startChild(ctx, o.Binary, nil)
	if err != nil {
		return nil, err
	}
	defer child.stop()
	res.BaselineRSS, _ = procStatus(child.pid)

	pool := &connPool{}
	defer pool.closeAll()
	openIdle(ctx, child.addr, o, idlePlan(ctx, child.addr, o.Conns), res, pool)
	// Settle: let per-connection goroutines reach their idle state.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(2 * time.Second):
	}
	res.IdleRSS, _ = procStatus(child.pid)
	if open := pool.total(); open > 0 {
		res.PerConnBytes = (res.IdleRSS - res.BaselineRSS) / int64(open)
	}
	res.Goroutines, res.HeapInuse, res.StackInuse = child.metrics()

	if o.ActiveStreams > 0 {
		if res.Active, err = activeAlongside(ctx, child, o.ActiveStreams, o.ActiveDeltas); err != nil {
			return nil, err
		}
		res.ActiveStreams, res.ActiveDeltas = o.ActiveStreams, o.ActiveDeltas
	}
	_, res.HWM = procStatus(child.pid)
	res.LoadAfter = loadAvg()
	return res, nil
}

// idleKind is one protocol's share of the idle connections.
type idleKind struct {
	name string
	idle *load.Idle
	want int
}

// idlePlan shares conns idle connections out: half SSE, half WebSocket;
// within a transport, in the protocol list's order, the protocols with a
// cap (Load.Idle.Max) first, each up to its cap, and the last one takes
// the rest. A protocol whose first connection fails to open (its frontend
// is not mounted) gets none; a transport's Fallback protocols are used
// only when none of the others can open one.
func idlePlan(ctx context.Context, addr string, conns int) []*idleKind {
	var plan []*idleKind
	for _, tr := range []struct {
		transport string
		n         int
	}{{load.SSE, (conns + 1) / 2}, {load.WebSocket, conns / 2}} {
		var open, fallback []*idleKind
		for i := range protocols.All {
			p := &protocols.All[i]
			if p.Load == nil || p.Load.Idle == nil || p.Load.Idle.Transport != tr.transport {
				continue
			}
			k := &idleKind{name: p.Name, idle: p.Load.Idle}
			if k.idle.Fallback {
				fallback = append(fallback, k)
			} else if c, err := k.idle.Open(ctx, addr, 0); err == nil {
				_ = c.Close()
				open = append(open, k)
			}
		}
		if len(open) == 0 {
			open = fallback
		}
		slices.SortStableFunc(open, func(a, b *idleKind) int { return cmp.Compare(b.idle.Max, a.idle.Max) })
		left := tr.n
		for i, k := range open {
			k.want = left
			if k.idle.Max > 0 && i < len(open)-1 {
				k.want = min(left, k.idle.Max)
			}
			left -= k.want
			plan = append(plan, k)
		}
	}
	return plan
}

// openIdle opens the plan's connections to addr through o.Dialers
// concurrent dialers, the kinds interleaved, and records the counts in
// res.
func openIdle(ctx context.Context, addr string, o IdleOptions, plan []*idleKind, res *IdleResult, pool *connPool) {
	type job struct {
		kind *idleKind
		i    int
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstFail atomic.Value
	for w := 0; w < o.Dialers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				c, err := j.kind.idle.Open(ctx, addr, j.i)
				if err != nil {
					failed.Add(1)
					firstFail.CompareAndSwap(nil, j.kind.name+": "+err.Error())
					continue
				}
				pool.add(j.kind.name, c)
			}
		}()
	}
	sent := make([]int, len(plan))
	for more := true; more && ctx.Err() == nil; {
		more = false
		for n, k := range plan { // one of each kind in turn
			if sent[n] < k.want {
				jobs <- job{k, sent[n]}
				sent[n]++
				more = true
			}
		}
	}
	close(jobs)
	wg.Wait()
	for _, k := range plan {
		res.Idle = append(res.Idle, IdleConns{Protocol: k.name, Transport: k.idle.Transport, Conns: pool.count(k.name), Text: k.idle.Text})
	}
	res.Failed = int(failed.Load())
	if f, ok := firstFail.Load().(string); ok {
		res.FirstFailure = f
	}
}

// activeAlongside runs streams × deltas active streams from the scripted
// backend through the child, with its idle connections open; the figures
// are the child's (RSS, CPU), not this process's allocations.
func activeAlongside(ctx context.Context, child *child, streams, deltas int) (*Side, error) {
	cl, err := referenceFrontend().Load.NewClient(load.ClientSpec{Base: "http://" + child.addr, Target: "stream",
		Params: map[string]any{"deltas": deltas, "delta_text": "tok "}, Streams: streams, Mode: "active"})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	h := &harness{o: Options{Streams: streams, Deltas: deltas, Timeout: 5 * time.Minute}}
	m := &mode{name: "active", cl: cl, prompt: func(k string) string { return k }, acc: &sideAcc{}, pid: child.pid}
	if err := h.round(ctx, m, true, false); err != nil {
		return nil, err
	}
	side := m.acc.side(streams)
	side.AllocsPerDelta, side.BytesPerDelta = 0, 0 // not the server's
	return side, nil
}

// child is the `interlingua serve` process under test.
type child struct {
	cmd  *exec.Cmd
	pid  int
	addr string
	dir  string
	logf *os.File
	done chan error
}

// startChild starts `bin serve` on a free loopback port with a data folder
// of its own, and config as its configuration file (nil: the embedded
// default), and waits until it is ready.
func startChild(ctx context.Context, bin string, config []byte, env ...string) (*child, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	dir, err := os.MkdirTemp("", "interlingua-idle-")
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := []string{"serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data"), "--log-level", "warn", "--shutdown-timeout", "2s"}
	if config != nil {
		file := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(file, config, 0o600); err != nil {
			logf.Close()
			os.RemoveAll(dir)
			return nil, err
		}
		args = append(args, "--config", file)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	c := &child{cmd: cmd, pid: cmd.Process.Pid, addr: addr, dir: dir, logf: logf, done: make(chan error, 1)}
	go c.wait()
	if err := waitReady(ctx, "http://"+addr); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w; serve log: %s", err, c.logTail())
	}
	return c, nil
}

func (c *child) wait() { c.done <- c.cmd.Wait() }

func (c *child) logTail() string {
	b, _ := os.ReadFile(c.logf.Name())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// stop sends SIGTERM and waits (SIGKILL after 20 s).
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.logf.Close()
	os.RemoveAll(c.dir)
}

// metrics scrapes go_goroutines, go_memstats_heap_inuse_bytes and
// go_memstats_stack_inuse_bytes.
func (c *child) metrics() (goroutines, heapInuse, stackInuse int64) {
	m := c.scrape()
	return int64(m["go_goroutines"]), int64(m["go_memstats_heap_inuse_bytes"]), int64(m["go_memstats_stack_inuse_bytes"])
}

// scrape reads the child's unlabelled /metrics samples.
func (c *child) scrape() map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get("http://" + c.addr + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		out[f[0]] = v
	}
	return out
}

// connPool holds the open connections by kind.
type connPool struct {
	mu    sync.Mutex
	conns map[string][]io.Closer
}

func (p *connPool) add(kind string, c io.Closer) {
	p.mu.Lock()
	if p.conns == nil {
		p.conns = map[string][]io.Closer{}
	}
	p.conns[kind] = append(p.conns[kind], c)
	p.mu.Unlock()
}

func (p *connPool) count(kind string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns[kind])
}

func (p *connPool) total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.conns {
		n += len(l)
	}
	return n
}

func (p *connPool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.conns {
		for _, c := range l {
			_ = c.Close()
		}
	}
	p.conns = nil
}

// WriteIdleMarkdown writes the idle result as a table.
func WriteIdleMarkdown(w io.Writer, r *IdleResult) {
	fmt.Fprintf(w, "### %d idle streaming connections to one `interlingua serve`\n\n", r.Conns)
	var kinds []string
	for _, k := range r.Idle {
		kinds = append(kinds, fmt.Sprintf("%d %s", k.Conns, k.Text))
	}
	fmt.Fprintf(w, "%s; %d failed to open. Open-files limit %d (hard %d).\n\n",
		strings.Join(kinds, ", "), r.Failed, r.NoFileSoft, r.NoFileHard)
	fmt.Fprintln(w, "| figure | server process |")
	fmt.Fprintln(w, "|---|---:|")
	fmt.Fprintf(w, "| RSS before (MiB) | %s |\n", mib(r.BaselineRSS))
	fmt.Fprintf(w, "| RSS with the connections open (MiB) | %s |\n", mib(r.IdleRSS))
	fmt.Fprintf(w, "| RSS per idle connection (KiB) | %s |\n", kib(r.PerConnBytes))
	fmt.Fprintf(w, "| goroutines | %s |\n", num(float64(r.Goroutines)))
	fmt.Fprintf(w, "| heap in use (MiB) | %s |\n", mib(r.HeapInuse))
	fmt.Fprintf(w, "| goroutine stacks (MiB) | %s |\n", mib(r.StackInuse))
	if a := r.Active; a != nil {
		fmt.Fprintf(w, "| active streams alongside (%s ← %s) | %d × %d deltas |\n", referenceFrontend().Load.Title, scriptedName(), r.ActiveStreams, r.ActiveDeltas)
		fmt.Fprintf(w, "| active: deltas/s | %s |\n", num(a.DeltasPerSec))
		fmt.Fprintf(w, "| active: TTFD p50 / p99 (µs) | %s / %s |\n", trim(a.TTFDP50us), trim(a.TTFDP99us))
		fmt.Fprintf(w, "| active: errors | %d |\n", a.Errors)
		fmt.Fprintf(w, "| active: peak RSS (MiB) | %s |\n", mib(a.RSSBytes))
		fmt.Fprintf(w, "| active: server CPU s / M deltas | %.2f |\n", a.CPUSecPerMDelta)
	}
	fmt.Fprintf(w, "| VmHWM at the end (MiB) | %s |\n", mib(r.HWM))
	fmt.Fprintf(w, "\nLoad average %.2f before, %.2f after.\n", r.LoadBefore[0], r.LoadAfter[0])
	if r.FirstFailure != "" {
		fmt.Fprintf(w, "First failure: %s\n", r.FirstFailure)
	}
	if r.Active != nil && r.Active.FirstError != "" {
		fmt.Fprintf(w, "First active-stream error: %s\n", r.Active.FirstError)
	}
	fmt.Fprintln(w)
}
