package runner

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// relay is a TCP forwarder in front of a server: it records the bytes each
// way (--trace), throttles what the server sends (a slow client), and
// counts connections (one connection for concurrent runs). Its target may
// be set after it listens, so a config can name it before the server it
// fronts exists.
type relay struct {
	ln     net.Listener
	target atomic.Pointer[string]
	ready  chan struct{}
	once   sync.Once

	// readBytes and readDelay throttle server-to-client bytes: at most
	// readBytes per write to the client, readDelay after each.
	readBytes int
	readDelay time.Duration
	rec       *recorder

	accepted atomic.Int64
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// throttle slows what a relay passes to the client: at most bytes per
// write, delay after each.
type throttle struct {
	bytes int
	delay time.Duration
}

// newRelay listens on a loopback port; target "" waits for setTarget.
func newRelay(target string, rec *recorder, th throttle) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, ready: make(chan struct{}), rec: rec, conns: map[net.Conn]struct{}{},
		readBytes: th.bytes, readDelay: th.delay}
	if target != "" {
		r.setTarget(target)
	}
	r.wg.Add(1)
	go r.acceptLoop()
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) setTarget(t string) {
	r.target.Store(&t)
	r.once.Do(func() { close(r.ready) })
}

func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

func (r *relay) acceptLoop() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.accepted.Add(1)
		r.wg.Add(1)
		go r.serve(c)
	}
}

// serve forwards one connection both ways until either side closes.
func (r *relay) serve(client net.Conn) {
	defer r.wg.Done()
	defer client.Close()
	if !r.track(client) {
		return
	}
	defer r.untrack(client)
	select {
	case <-r.ready:
	case <-time.After(10 * time.Second):
		return
	}
	target := r.target.Load()
	if target == nil {
		return
	}
	server, err := net.DialTimeout("tcp", *target, 10*time.Second)
	if err != nil {
		return
	}
	defer server.Close()
	if tc, ok := server.(*net.TCPConn); ok && r.readBytes > 0 {
		// A small receive buffer makes the slow reader's pace reach the
		// server sooner (its writes block instead of filling our buffer).
		_ = tc.SetReadBuffer(16 << 10)
	}
	if !r.track(server) {
		return
	}
	defer r.untrack(server)
	id := r.accepted.Load()
	done := make(chan struct{})
	go func() { // client to server; ends when either side closes
		defer close(done)
		r.copy(server, client, id, ">", 0, 0)
		closeWrite(server)
	}()
	r.copy(client, server, id, "<", r.readBytes, r.readDelay)
	closeWrite(client)
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// copy moves bytes from src to dst, recording them; n and delay throttle.
func (r *relay) copy(dst, src net.Conn, conn int64, dir string, n int, delay time.Duration) {
	buf := make([]byte, 32<<10)
	if n > 0 {
		buf = buf[:min(n, len(buf))]
	}
	view := &wireView{}
	for {
		k, err := src.Read(buf)
		if k > 0 {
			if r.rec != nil {
				r.rec.wire(conn, dir, k, view.render(buf[:k]))
			}
			if _, werr := dst.Write(buf[:k]); werr != nil {
				_ = src.Close()
				return
			}
			if delay > 0 {
				time.Sleep(delay) // the slow client's pace, not a wait for an event
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = dst.Close()
			}
			return
		}
	}
}

// close stops listening, cuts every connection and waits for the
// forwarding goroutines.
func (r *relay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.once.Do(func() { close(r.ready) })
	r.wg.Wait()
}
