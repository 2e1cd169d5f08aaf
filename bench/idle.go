package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// IdleOptions configure the idle-connections measurement.
type IdleOptions struct {
	// Conns is the number of idle streaming connections: half SSE (agent
	// protocol thread streams, or native NDJSON runs that hang when the
	// agent frontend is not mounted), half WebSocket (Glide chatStream, at
	// most GlideConns, the rest Evergreen sessions). Default 10,000.
	Conns int
	// GlideConns caps the Glide connections (its frontend accepts 1,024).
	// Default 1,000.
	GlideConns int
	// AgentThreads is the number of agent-protocol threads the SSE
	// streams subscribe to, round robin (the frontend holds at most
	// MaxThreads, 1,000, in memory). Default 500.
	AgentThreads int
	// ActiveStreams run at once, while the idle connections stay open,
	// through the Triton frontend from the scripted backend, each
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
	Conns        int    `json:"conns"`
	SSEKind      string `json:"sse_kind"`
	AgentThreads int    `json:"agent_threads,omitempty"`
	SSE          int    `json:"sse"`
	GlideWS      int    `json:"glide_ws"`
	EvergreenWS  int    `json:"evergreen_ws"`
	Failed       int    `json:"failed"`
	FirstFailure string `json:"first_failure,omitempty"`
	NoFileSoft   uint64 `json:"nofile_soft"`
	NoFileHard   uint64 `json:"nofile_hard"`
	// BaselineRSS is the server's VmRSS before the connections, IdleRSS
	// with all of them open (after a settle), PerConnBytes the difference
	// per connection.
	BaselineRSS  int64 `json:"baseline_rss_bytes"`
	IdleRSS      int64 `json:"idle_rss_bytes"`
	PerConnBytes int64 `json:"per_conn_bytes"`
	Goroutines   int64 `json:"goroutines"`
	HeapInuse    int64 `json:"heap_inuse_bytes"`
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

// Idle starts `interlingua serve` as a child process (so its RSS is the
// server's alone), opens the idle connections, reads the child's memory,
// then runs the active streams alongside them.
func Idle(ctx context.Context, o IdleOptions) (*IdleResult, error) {
	o.Conns = cmpOr(o.Conns, 10_000)
	o.GlideConns = cmpOr(o.GlideConns, 1000)
	o.AgentThreads = cmpOr(o.AgentThreads, 500)
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
	res.SSEKind, res.AgentThreads = "agent", o.AgentThreads
	if err := openSSE(child.addr, "agent", 0, pool); err != nil {
		res.SSEKind, res.AgentThreads = "native", 0
	}
	pool.closeAll()
	openIdle(ctx, child.addr, o, res, pool)
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
	res.Goroutines, res.HeapInuse = child.metrics()

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

// openIdle opens o.Conns idle streaming connections to addr through
// o.Dialers concurrent dialers, half SSE and half WebSocket (Glide up to
// o.GlideConns, Evergreen after), and records the counts in res.
func openIdle(ctx context.Context, addr string, o IdleOptions, res *IdleResult, pool *connPool) {
	nWS := o.Conns - o.Conns/2
	nGlide := min(nWS, o.GlideConns)
	type job struct {
		kind string
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
				var err error
				switch j.kind {
				case "sse":
					err = openSSE(addr, res.SSEKind, j.i%o.AgentThreads, pool)
				case "glide":
					err = openWS(ctx, "ws://"+addr+"/v1/language/stream/chatStream", pool)
				case "evergreen":
					err = openWS(ctx, "ws://"+addr+"/evergreen/ws", pool)
				}
				if err != nil {
					failed.Add(1)
					firstFail.CompareAndSwap(nil, j.kind+": "+err.Error())
				}
			}
		}()
	}
	for i := 0; i < o.Conns; i++ {
		j := job{"sse", i}
		if i%2 == 1 { // interleave the kinds
			j.kind = "glide"
			if i/2 >= nGlide {
				j.kind = "evergreen"
			}
		}
		if ctx.Err() != nil {
			break
		}
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	res.SSE, res.GlideWS, res.EvergreenWS = pool.count("sse"), pool.count("glide"), pool.count("evergreen")
	res.Failed = int(failed.Load())
	if f, ok := firstFail.Load().(string); ok {
		res.FirstFailure = f
	}
}

// activeAlongside runs streams × deltas active streams from the scripted
// backend through the child, with its idle connections open; the figures
// are the child's (RSS, CPU), not this process's allocations.
func activeAlongside(ctx context.Context, child *child, streams, deltas int) (*Side, error) {
	cl := newTritonClient(clientSpec{base: "http://" + child.addr, target: "stream",
		params: map[string]any{"deltas": deltas, "delta_text": "tok "}, streams: streams, mode: "active"})
	defer cl.close()
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

// metrics scrapes go_goroutines and go_memstats_heap_inuse_bytes.
func (c *child) metrics() (goroutines, heapInuse int64) {
	m := c.scrape()
	return int64(m["go_goroutines"]), int64(m["go_memstats_heap_inuse_bytes"])
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

// openSSE opens one idle streaming response with a raw HTTP/1.1 request
// and keeps the connection once the response headers (and, for native,
// the first event line) have arrived.
func openSSE(addr, kind string, i int, pool *connPool) error {
	var path, body string
	switch kind {
	case "agent":
		path, body = fmt.Sprintf("/threads/idle-%d/stream", i), `{"channels":["lifecycle"]}`
	default:
		path, body = "/v1/runs", `{"target":"stream","parameters":{"hang":true}}`
	}
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", path, addr, len(body), body)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return err
	}
	var buf [2048]byte
	n := 0
	for !bytes.Contains(buf[:n], []byte("\r\n\r\n")) {
		if n == len(buf) {
			c.Close()
			return errors.New("response headers too long")
		}
		k, err := c.Read(buf[n:])
		n += k
		if err != nil {
			c.Close()
			return fmt.Errorf("reading response headers: %w", err)
		}
	}
	if !bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 200")) {
		c.Close()
		line, _, _ := bytes.Cut(buf[:n], []byte("\r\n"))
		return fmt.Errorf("%s: %s", path, line)
	}
	_ = c.SetDeadline(time.Time{})
	pool.add("sse", c)
	return nil
}

var idleDialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 512, WriteBufferSize: 512}

func openWS(ctx context.Context, url string, pool *connPool) error {
	ws, resp, err := idleDialer.DialContext(ctx, url, nil)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("%v (HTTP %d)", err, resp.StatusCode)
		}
		return err
	}
	kind := "glide"
	if strings.Contains(url, "/evergreen/") {
		kind = "evergreen"
	}
	pool.add(kind, ws.NetConn())
	return nil
}

// WriteIdleMarkdown writes the idle result as a table.
func WriteIdleMarkdown(w io.Writer, r *IdleResult) {
	fmt.Fprintf(w, "### %d idle streaming connections to one `interlingua serve`\n\n", r.Conns)
	fmt.Fprintf(w, "%d SSE (%s), %d Glide WebSocket, %d Evergreen WebSocket; %d failed to open. Open-files limit %d (hard %d).\n\n",
		r.SSE, sseKindText(r.SSEKind, r.AgentThreads), r.GlideWS, r.EvergreenWS, r.Failed, r.NoFileSoft, r.NoFileHard)
	fmt.Fprintln(w, "| figure | server process |")
	fmt.Fprintln(w, "|---|---:|")
	fmt.Fprintf(w, "| RSS before (MiB) | %s |\n", mib(r.BaselineRSS))
	fmt.Fprintf(w, "| RSS with the connections open (MiB) | %s |\n", mib(r.IdleRSS))
	fmt.Fprintf(w, "| RSS per idle connection (KiB) | %s |\n", kib(r.PerConnBytes))
	fmt.Fprintf(w, "| goroutines | %s |\n", num(float64(r.Goroutines)))
	fmt.Fprintf(w, "| heap in use (MiB) | %s |\n", mib(r.HeapInuse))
	if a := r.Active; a != nil {
		fmt.Fprintf(w, "| active streams alongside (Triton SSE ← scripted) | %d × %d deltas |\n", r.ActiveStreams, r.ActiveDeltas)
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

func sseKindText(k string, threads int) string {
	if k == "agent" {
		return fmt.Sprintf("agent-protocol thread streams, POST /threads/{id}/stream, on %d threads", threads)
	}
	return "native NDJSON runs that hang after their first event, POST /v1/runs"
}
