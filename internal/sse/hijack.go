package sse

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Conn is an event stream on a connection taken over from net/http
// (Hijack), so a stream that waits for events needs no handler: net/http
// keeps, for as long as a handler runs, its goroutine's deep stack, the
// connection's 4 KiB read and write buffers, the response's 2 KiB
// chunking buffer and the request, 27.5 KB of a server's RSS per idle
// stream (bench --idle, all SSE) where a Conn holds one goroutine that
// waits for the peer to hang up.
//
// The body is HTTP/1.1 chunked (RFC 9112 §7.1), each Write one chunk;
// Finish writes the last chunk. The head says Connection: close: the
// connection ends with the stream, as net/http cannot have it back.
//
// Write and Finish are for one goroutine; Close may be called from any.
type Conn struct {
	nc      net.Conn
	timeout time.Duration
	gone    func()
	cutoffs Counter
	watched chan struct{} // closed when watch has returned
	once    sync.Once
}

// HijackConfig configures a Conn.
type HijackConfig struct {
	// WriteTimeout bounds each write: a peer that stops reading is cut
	// off. Required.
	WriteTimeout time.Duration
	// Gone, if not nil, is called once, from another goroutine, when the
	// peer closes the connection (or sends more than it may) or the Conn
	// is closed.
	Gone func()
	// Cutoffs, if not nil, counts the write that WriteTimeout cut off
	// (slow_consumer_cutoffs{protocol="http"}, as the server counts the
	// streams it still carries).
	Cutoffs Counter
}

// Counter is a prometheus.Counter as a Conn uses it.
type Counter interface{ Inc() }

// maxUnread bounds what a peer may send after its request before the
// stream is cut: an event stream's client sends nothing more (a pipelined
// request is answered by Connection: close, never read).
const maxUnread = 64 << 10

// Hijack takes w's connection over for an event stream once the handler
// has read the request (and set the response headers, e.g. SetHeaders):
// it writes the response head, 200 with w's header fields, and returns the
// Conn.
//
// ok is false, with nothing written, when the connection cannot be taken
// over (HTTP/2, HTTP/1.0, a ResponseWriter that cannot hijack): serve the
// stream through w as before. An error means the head could not be
// written; the connection is closed.
func Hijack(w http.ResponseWriter, r *http.Request, cfg HijackConfig) (c *Conn, ok bool, err error) {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 {
		return nil, false, nil
	}
	h := w.Header().Clone()
	nc, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false, nil // not an HTTP/1.1 connection net/http lets go of
	}
	// The read buffer net/http returns holds nothing for us (the request
	// was read; anything after it is ignored, as watch ignores it) and is
	// dropped with the write buffer: an idle Conn keeps neither.
	c = &Conn{nc: nc, timeout: cfg.WriteTimeout, gone: cfg.Gone, cutoffs: cfg.Cutoffs, watched: make(chan struct{})}
	h.Del("Content-Length")
	h.Set("Transfer-Encoding", "chunked")
	h.Set("Connection", "close")
	if _, set := h["Date"]; !set {
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	}
	var head bytes.Buffer // a bytes.Buffer's writes do not fail
	head.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&head)
	head.WriteString("\r\n")
	if err = c.writeRaw(head.Bytes()); err != nil {
		nc.Close()
		return nil, true, err
	}
	go c.watch()
	return c, true, nil
}

// writeRaw writes b to the connection within the write timeout.
func (c *Conn) writeRaw(b []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.nc.Write(b)
	return err
}

// watch waits for the peer to hang up: an event stream's reader learns of
// a client that left without waiting to write to it.
func (c *Conn) watch() {
	defer close(c.watched)
	var buf [256]byte
	for unread := 0; unread <= maxUnread; {
		n, err := c.nc.Read(buf[:])
		if err != nil {
			break
		}
		unread += n
	}
	_ = c.closeConn()
}

var crlf = []byte("\r\n")

// chunkBufs are the buffers a chunk is gathered in on a connection that
// cannot write several buffers at once (TLS: one Write is one record).
var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Write sends p as one chunk (an empty p sends nothing: a chunk of size
// zero ends the body). A failed Write leaves the stream unusable: Close it.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var size [18]byte
	head := append(strconv.AppendUint(size[:0], uint64(len(p)), 16), crlf...)
	var err error
	if _, tcp := c.nc.(*net.TCPConn); tcp {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.timeout))
		bufs := net.Buffers{head, p, crlf} // one writev, p not copied
		_, err = bufs.WriteTo(c.nc)
	} else {
		bp := chunkBufs.Get().(*[]byte)
		b := append(append(append((*bp)[:0], head...), p...), crlf...)
		err = c.writeRaw(b)
		if cap(b) <= maxKeptBuffer {
			*bp = b[:0]
			chunkBufs.Put(bp)
		}
	}
	if err != nil {
		if c.cutoffs != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			c.cutoffs.Inc()
		}
		return 0, err
	}
	return len(p), nil
}

// Finish ends the body with its last chunk and closes the connection.
func (c *Conn) Finish() error {
	err := c.writeRaw([]byte("0\r\n\r\n"))
	c.Close()
	return err
}

// Close closes the connection at once (a Write it interrupts fails) and
// waits for the Conn's goroutine.
func (c *Conn) Close() error {
	err := c.closeConn()
	<-c.watched
	return err
}

// closeConn closes the connection once and then calls gone.
func (c *Conn) closeConn() error {
	var err error
	c.once.Do(func() {
		if err = c.nc.Close(); errors.Is(err, net.ErrClosed) {
			err = nil
		}
		if c.gone != nil {
			c.gone()
		}
	})
	return err
}
