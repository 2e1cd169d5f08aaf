package wsconn

import (
	"bufio"
	"cmp"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Upgrade upgrades r to a WebSocket with up, as up.Upgrade does, and wraps it
// in a Conn (see New) whose writer puts the frames queued together on the
// wire in one write: gorilla/websocket writes each frame with its own write
// to the network connection, one syscall per delta on a streaming socket.
// Nothing is held back to wait for a frame that has not been queued yet; see
// heldConn. On error the Upgrader has replied to the client, as with
// up.Upgrade.
//
// An Upgrader that sets no buffers gets writeBuffers and a read buffer of
// readBufferSize: gorilla then holds a write buffer only while it writes a
// message, and reads into a small buffer of its own (it keeps net/http's 4
// KiB ones for the life of the connection otherwise: 8 KiB of every idle
// socket's heap).
//
// Serve the Conn from a goroutine of your own and return from the handler:
// net/http keeps the hijacked connection's request state (its 4 KiB read
// and write buffers, the response writer's, the middleware's values) and
// the handler's deep stack for as long as the handler runs. With the
// handler gone, an idle socket costs 22.8 KiB of a server's RSS where it
// cost 28.9 (bench --idle 4000, half of them WebSockets). The request's
// context is cancelled when the handler returns: keep its values with
// context.WithoutCancel.
func Upgrade(up *websocket.Upgrader, w http.ResponseWriter, r *http.Request, responseHeader http.Header, cfg Config) (*Conn, error) {
	if up.WriteBufferPool == nil && up.WriteBufferSize == 0 && up.ReadBufferSize == 0 {
		pooled := *up
		pooled.WriteBufferPool, pooled.ReadBufferSize = &writeBuffers, readBufferSize
		up = &pooled
	}
	ws, err := up.Upgrade(&heldHijacker{ResponseWriter: w}, r, responseHeader)
	if err != nil {
		return nil, err
	}
	return New(ws, cfg), nil
}

// readBufferSize is the read buffer of a connection Upgrade makes: what
// clients send on our sockets (requests, commands, cancels) is small; a
// larger message takes more reads, not more memory.
const readBufferSize = 1024

// writeBuffers are gorilla's write buffers for the connections Upgrade
// makes with an Upgrader that brings no pool of its own.
var writeBuffers sync.Pool

// heldHijacker hands gorilla's Upgrader the hijacked connection wrapped in a
// heldConn. It unwraps w with http.ResponseController, so middleware that
// wraps the ResponseWriter needs only an Unwrap method.
type heldHijacker struct {
	http.ResponseWriter
}

func (h *heldHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &heldConn{Conn: c}, brw, nil
}

// maxHeld bounds the bytes a heldConn collects before it writes them: a
// write that would take it past maxHeld writes the held bytes and itself
// together (writev on TCP), so a burst of large frames costs one syscall per
// maxHeld or so, and a single frame larger than it one syscall.
const maxHeld = 64 << 10

// heldBufs recycles the held bytes' buffers: a connection needs one only
// while its writer is in a burst, and 10k idle connections need none.
var heldBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// heldConn is the network connection under a Conn made by Upgrade. Between
// hold and release, which writeLoop calls around the frames it found queued,
// every write (gorilla's data frames, and any control frame gorilla's read
// side writes meanwhile, such as a pong) is appended to buf instead of
// written; release writes them all at once. Writes stay in the order gorilla
// made them, as wmu orders both against release. A write deadline is set
// at once (cutOff may shorten it from another goroutine while a release is
// blocked in the write, so it does not wait for wmu), but not again when it
// is the one set last: gorilla sets one per frame, the writer one per burst,
// and each setting modifies a runtime timer under its lock.
type heldConn struct {
	net.Conn

	wmu  sync.Mutex // serialises writes to Conn; guards the fields below
	held bool
	buf  *[]byte // from heldBufs while held and non-empty
	// broken is the error of a write to Conn that failed, perhaps after
	// part of a frame went out: every later write fails with it, so that
	// no frame (the close frame included) follows a partial one, which
	// the peer would read as that frame's payload. gorilla cannot know:
	// its frames went into buf, which release writes.
	broken error

	dmu      sync.Mutex // guards deadline and known
	deadline time.Time  // the write deadline set last, when known
	known    bool
}

// SetWriteDeadline sets the write deadline unless it is the one set last.
func (h *heldConn) SetWriteDeadline(t time.Time) error {
	h.dmu.Lock()
	defer h.dmu.Unlock()
	if h.known && t.Equal(h.deadline) {
		return nil
	}
	err := h.Conn.SetWriteDeadline(t)
	h.deadline, h.known = t, err == nil
	return err
}

// SetDeadline sets both deadlines, noting the write one.
func (h *heldConn) SetDeadline(t time.Time) error {
	h.dmu.Lock()
	defer h.dmu.Unlock()
	err := h.Conn.SetDeadline(t)
	h.deadline, h.known = t, err == nil
	return err
}

// Write writes p, or appends it to the held bytes while held.
func (h *heldConn) Write(p []byte) (int, error) {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	if h.broken != nil {
		return 0, h.broken
	}
	if !h.held {
		return h.write(p)
	}
	if h.buf == nil {
		h.buf = heldBufs.Get().(*[]byte)
	}
	if len(*h.buf)+len(p) <= maxHeld {
		*h.buf = append(*h.buf, p...)
		return len(p), nil
	}
	held := len(*h.buf)
	bufs := net.Buffers{*h.buf, p}
	n, err := bufs.WriteTo(h.Conn)
	h.putBuf()
	if err != nil {
		h.broken = err
	}
	return max(int(n)-held, 0), err
}

// write writes p to Conn, remembering a failure. Called with wmu held.
func (h *heldConn) write(p []byte) (int, error) {
	n, err := h.Conn.Write(p)
	if err != nil {
		h.broken = err
	}
	return n, err
}

// hold starts collecting writes. A nil h (a Conn not made by Upgrade)
// ignores hold and release.
func (h *heldConn) hold() {
	if h == nil {
		return
	}
	h.wmu.Lock()
	h.held = true
	h.wmu.Unlock()
}

// release stops collecting writes and writes the held bytes, in one write.
func (h *heldConn) release() error {
	if h == nil {
		return nil
	}
	h.wmu.Lock()
	defer h.wmu.Unlock()
	h.held = false
	if h.buf == nil {
		return h.broken
	}
	var err error
	if h.broken == nil {
		_, err = h.write(*h.buf)
	}
	h.putBuf()
	return cmp.Or(err, h.broken)
}

// putBuf returns the held bytes' buffer to heldBufs, empty.
func (h *heldConn) putBuf() {
	*h.buf = (*h.buf)[:0]
	heldBufs.Put(h.buf)
	h.buf = nil
}
