package agent

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/interlingua-dev/interlingua/internal/sse"
)

// sseStream is one SSE stream of a thread's events. Its writer is a
// goroutine started when there is something to write (events, a gap, a
// heartbeat, the end) and gone once it is written, so a stream that waits
// holds no goroutine of its own: on an HTTP/1.1 connection, taken over
// from net/http (sse.Hijack), an idle stream costs its place in the
// thread's tail (bridge), a timer and sse.Conn's goroutine waiting for the
// peer to hang up. Over
// HTTP/2 the handler waits for the stream's end instead, writing nothing
// itself.
type sseStream struct {
	f    *Frontend
	flt  *filter
	tail *tailReader
	sw   *sse.Writer
	conn *sse.Conn                // nil: written through the handler's ResponseWriter
	rc   *http.ResponseController // without conn: the write deadline

	// state is the writer's: idle, running, or running and asked to look
	// again (kick while it runs). The writer alone reads the thread and
	// writes; the one that finds nothing more to do goes idle.
	state atomic.Int32
	beat  atomic.Bool // a heartbeat is due
	stop  atomic.Bool // end the stream (the server, or the peer left)
	// finish: the server ends the stream, which ends the body properly
	// (its last chunk) for a peer still there.
	finish atomic.Bool
	// draining: the server is shutting down; the stream ends once its
	// thread's runs here have ended and it has written their ends
	// (Frontend.settled), looking again every settlePoll.
	draining atomic.Bool

	hb      *time.Timer
	settle  *time.Timer // draining: look again
	unwatch func()      // stops open's watches (shutdown, the peer, Close)
	batch   []record
	ended   chan struct{} // closed when the stream has ended
}

const (
	writerIdle int32 = iota
	writerRunning
	writerAgain
)

// open starts the response: on a connection taken over from net/http when
// it can be, else through w (HTTP/2). The stream ends once the server's
// shutdown (Shutdown) has let its thread's runs here end and it has
// written their ends, when the peer leaves (the Conn's gone, or the
// request's context through w), and at once when Close stops waiting for
// that (f.streamsCtx).
func (s *sseStream) open(w http.ResponseWriter, r *http.Request) bool {
	f := s.f
	sse.SetHeaders(w.Header())
	conn, hijacked, err := sse.Hijack(w, r, sse.HijackConfig{WriteTimeout: f.cfg.WriteTimeout, Gone: s.end, Cutoffs: f.cfg.SlowSSE})
	stopShutdown := context.AfterFunc(f.closingCtx, s.shutdown)
	var stopOther func() bool // the other watch: Close (a Conn) or the peer (w)
	switch {
	case err != nil:
		f.cfg.Logger.Debug("sse stream not started", "thread", s.tail.thread, "err", err)
	case hijacked:
		s.conn, s.sw = conn, sse.NewConnWriter(conn)
		stopOther = context.AfterFunc(f.streamsCtx, func() { _ = conn.Close() })
	default:
		if s.sw, err = sse.NewWriter(w); err != nil {
			canonicalHTTPError(w, err)
			break
		}
		stopPeer := context.AfterFunc(r.Context(), s.end)
		stopClose := context.AfterFunc(f.streamsCtx, s.end)
		stopOther = func() bool { a, b := stopPeer(), stopClose(); return a && b }
		w.WriteHeader(http.StatusOK)
		s.rc = http.NewResponseController(w)
		_ = s.rc.SetWriteDeadline(f.cfg.Now().Add(f.cfg.WriteTimeout))
		err = s.rc.Flush()
	}
	s.unwatch = func() {
		if stopOther != nil {
			stopOther()
		}
		stopShutdown()
	}
	return err == nil
}

// kick makes sure a writer will look at the stream: it starts one, or
// tells the running one to look again. It never blocks (the thread's
// tail calls it under its lock).
func (s *sseStream) kick() {
	for {
		switch s.state.Load() {
		case writerIdle:
			if s.state.CompareAndSwap(writerIdle, writerRunning) {
				go s.run()
				return
			}
		case writerRunning:
			if s.state.CompareAndSwap(writerRunning, writerAgain) {
				return
			}
		default:
			return
		}
	}
}

// end asks the stream to end; its writer closes it.
func (s *sseStream) end() {
	s.stop.Store(true)
	s.kick()
}

// shutdown starts the stream's end for the server's shutdown: it goes on
// until its thread's runs here have ended and their ends are written.
func (s *sseStream) shutdown() {
	s.draining.Store(true)
	s.kick()
}

// heartbeat is the timer's: a comment is due.
func (s *sseStream) heartbeat() {
	s.beat.Store(true)
	s.kick()
}

// run is the writer: it writes what there is until there is nothing, then
// goes idle unless kicked meanwhile. A stream that ends (asked to, or a
// write failed) is closed here and keeps its writer state running, so no
// later kick starts another.
func (s *sseStream) run() {
	for {
		if !s.deliver() {
			s.close()
			return
		}
		if s.rest() {
			return
		}
	}
}

// rest makes the writer idle, unless it was kicked while it ran: then it
// stays running (false) and must look again.
func (s *sseStream) rest() bool {
	if s.state.CompareAndSwap(writerRunning, writerIdle) {
		return true
	}
	s.state.Store(writerRunning)
	return false
}

// deliver writes the events after the reader's cursor and a due
// heartbeat; false when the stream must end.
func (s *sseStream) deliver() bool {
	for !s.stop.Load() {
		// The records written let go of their frames (a values frame is
		// the whole state).
		clear(s.batch)
		batch, g, err := s.tail.read(s.flt.match, s.batch[:0])
		s.batch = batch
		if err != nil {
			// The log cannot serve the stream (it lost events within
			// what it holds, or cannot be read): the client is told, and
			// resumes from its last event.
			s.deadline()
			_ = s.sw.Data(errorFrame(-1, asProtoError(err)))
			_ = s.sw.Flush()
			return false
		}
		if len(s.batch) == 0 && g == nil && !s.tail.more {
			break
		}
		if !s.write(s.batch, g) {
			return false
		}
	}
	if s.stop.Load() {
		return false
	}
	if s.draining.Load() {
		if s.f.settled(s.tail.thread, s.tail.at) {
			s.finish.Store(true)
			return false
		}
		s.settle.Reset(settlePoll)
	}
	if s.beat.Swap(false) {
		s.deadline()
		if s.sw.Comment("heartbeat") != nil {
			return false
		}
		s.hb.Reset(s.f.cfg.Heartbeat)
	}
	if cap(s.batch) > readBatch { // an idle stream keeps no large batch
		s.batch = nil
	}
	return true
}

// deadline bounds the next write (a Conn bounds each write itself).
func (s *sseStream) deadline() {
	if s.conn == nil {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.f.cfg.WriteTimeout))
	}
}

// write writes a gap report, if any, and the records (those the
// stream's filter matches), in one flush (up to sse.BatchBytes per
// write): every event in it was ready when it was read.
func (s *sseStream) write(recs []record, g *gap) bool {
	s.deadline()
	if g != nil && s.sw.Data(errorFrame(-1, gapError(g))) != nil {
		return false
	}
	for i := range recs {
		if err := s.sw.QueueSeqEvent(recs[i].seq, recs[i].method, recs[i].frame); err != nil {
			return false
		}
	}
	return s.sw.Flush() == nil
}

// close ends the stream: the thread forgets its reader, the connection
// ends (with its last chunk when the server ended the stream and the
// peer is still there), and the handler waiting over HTTP/2 returns.
func (s *sseStream) close() {
	s.hb.Stop()
	s.settle.Stop()
	s.unwatch()
	s.tail.close()
	switch {
	case s.conn == nil:
	case s.finish.Load():
		_ = s.conn.Finish()
	default:
		_ = s.conn.Close()
	}
	clear(s.batch)
	close(s.ended)
	s.f.wg.Done()
}
