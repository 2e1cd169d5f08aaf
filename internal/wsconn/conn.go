package wsconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Conn is a WebSocket connection whose writes all go through one goroutine
// at a time, writeLoop, fed by a bounded queue. Send, SendText, Close, Done
// and Err may be called from any goroutine; Read from one goroutine at a
// time.
type Conn struct {
	ws   *websocket.Conn
	cfg  Config
	out  *sendQueue // writeLoop is its only taker
	held *heldConn  // ws's network connection if made by Upgrade, else nil

	// wmu guards the write turn: writing is set while a writeLoop runs
	// (it alone writes), pingDue once the ping timer has fired and until
	// the ping is written. A writeLoop runs only while there is something
	// to write, so an idle connection holds no writer goroutine.
	wmu     sync.Mutex
	writing bool
	pingDue bool
	ping    *time.Timer

	once    sync.Once
	closing chan struct{} // closed when the Conn starts to end; the fields below are set before
	err     error         // why it ended
	code    int           // close code to send, or 0 for none
	reason  string        // close reason to send
	flush   bool          // write the queued frames before the close frame
	done    chan struct{} // closed when writeLoop has returned and ws is closed

	// rmu orders read-deadline extensions against stopRead, so a pong
	// processed while Read's context is cancelled cannot undo the stop.
	rmu sync.Mutex
}

// frame is one queued data message.
type frame struct {
	typ  int
	data []byte
}

// New wraps ws, which must not be used directly afterwards. Its writer
// goroutine runs while there is something to write: queued frames, a ping
// (every PingInterval), the close handshake (see Close). New sets ws's
// read limit and pong handler, and Read its read deadline; gorilla's
// default ping and close handlers stay in place.
func New(ws *websocket.Conn, cfg Config) *Conn {
	cfg = cfg.withDefaults()
	c := &Conn{
		ws:      ws,
		cfg:     cfg,
		out:     newSendQueue(cfg.SendQueue),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	c.held, _ = ws.NetConn().(*heldConn)
	ws.SetReadLimit(cfg.MaxMessageBytes)
	ws.SetPongHandler(func(string) error {
		c.extendRead()
		return nil
	})
	c.wmu.Lock() // the timer may fire before the assignment is done
	c.ping = time.AfterFunc(cfg.PingInterval, c.pingTime)
	c.wmu.Unlock()
	return c
}

// Send queues a text or binary message for the writer and returns without
// waiting for it to be written. It takes ownership of data: the caller must
// not modify it afterwards (sending the same unmodified slice repeatedly is
// fine). Messages queued by one goroutine are written in order.
//
// If the queue is full the peer is cut off as a slow consumer: Send returns
// an *Error with close code 1008 and cause ErrSlowConsumer, and the Conn
// ends. Once the Conn has ended Send returns Err. A msgType other than text
// or binary, or a done ctx, is refused without ending the Conn; ctx is only
// checked before queuing, as Send never blocks. A nil error means queued,
// not delivered.
func (c *Conn) Send(ctx context.Context, msgType int, data []byte) error {
	if msgType != websocket.TextMessage && msgType != websocket.BinaryMessage {
		return canonical.Errorf(canonical.CodeInvalidArgument,
			"wsconn: message type %d is neither text (1) nor binary (2)", msgType)
	}
	if err := ctx.Err(); err != nil {
		return canonical.AsError(err)
	}
	select {
	case <-c.closing:
		return c.err
	default:
	}
	if c.out.push(frame{typ: msgType, data: data}) {
		c.kick()
		return nil
	}
	return c.cutOff() // slow consumer: cut off, never grow
}

// SendWait is Send for producers that can wait: when the queue is full it
// waits for room up to half of WriteTimeout (the peer may just be slower
// than the producer, and a producer that waits is backpressure), and only
// then cuts the peer off as a slow consumer. Half, so the cut-off comes
// while the writer's blocked write can still finish and the 1008 close
// frame follow it. It returns early when ctx ends or the connection closes.
func (c *Conn) SendWait(ctx context.Context, msgType int, data []byte) error {
	if msgType != websocket.TextMessage && msgType != websocket.BinaryMessage {
		return canonical.Errorf(canonical.CodeInvalidArgument,
			"wsconn: message type %d is neither text (1) nor binary (2)", msgType)
	}
	f := frame{typ: msgType, data: data}
	var t *time.Timer
	for {
		select {
		case <-c.closing:
			return c.err
		default:
		}
		if c.out.push(f) {
			c.kick()
			return nil
		}
		if t == nil {
			t = time.NewTimer(c.cfg.WriteTimeout / 2)
			defer t.Stop()
		}
		select { // the writer signals room as it takes each frame
		case <-c.out.room:
		case <-ctx.Done():
			return canonical.AsError(ctx.Err())
		case <-c.closing:
			return c.err
		case <-t.C:
			return c.cutOff()
		}
	}
}

// cutOff ends the connection as a slow consumer (1008).
func (c *Conn) cutOff() error {
	msg := fmt.Sprintf("send queue full (%d frames)", c.out.max)
	err := &Error{Code: ClosePolicyViolation, Reason: msg, Err: &canonical.Error{
		Code: canonical.CodeResourceExhausted, Message: msg, Cause: ErrSlowConsumer}}
	if !c.end(err, false) {
		return c.err
	}
	if c.cfg.SlowConsumers != nil {
		c.cfg.SlowConsumers.Inc()
	}
	// writeLoop is most likely blocked writing to this peer; shorten that
	// write so the close frame follows within CloseGrace. (Best effort: a
	// write starting just now sets its own, WriteTimeout, deadline.)
	if c.cfg.CloseGrace < c.cfg.WriteTimeout {
		_ = c.ws.NetConn().SetWriteDeadline(time.Now().Add(c.cfg.CloseGrace))
	}
	return err
}

// SendText is Send of a text message without a context.
func (c *Conn) SendText(data []byte) error {
	return c.Send(context.Background(), websocket.TextMessage, data)
}

// Read returns the next text or binary message. Call it from one goroutine
// at a time, and keep calling it: pings, pongs and close frames are only
// processed while a Read is in progress. Read fails if the peer sends
// nothing, not even a pong, for 2x PingInterval from its start.
//
// Any error ends the Conn, and Read returns Err: the peer's
// *websocket.CloseError, an *Error with 1009 for a message over
// Config.MaxMessageBytes or 1008 for a missed pong, or an *Error with 1001
// wrapping ctx's error when ctx is done, which also unblocks a Read in
// progress. After the Conn has started to end Read returns Err at once.
func (c *Conn) Read(ctx context.Context) (msgType int, data []byte, err error) {
	select {
	case <-c.closing:
		return 0, nil, c.err
	default:
	}
	if cerr := ctx.Err(); cerr != nil {
		c.endContext(cerr)
		return 0, nil, c.err
	}
	c.extendRead()
	if ctx.Done() != nil {
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(fired)
			c.endContext(ctx.Err())
			c.stopRead()
		})
		defer func() {
			if !stop() {
				<-fired
			}
		}()
	}
	msgType, data, err = c.ws.ReadMessage()
	if err != nil {
		c.endRead(err)
		return 0, nil, c.err
	}
	return msgType, data, nil
}

// Close ends the Conn: it writes the frames already queued, then a close
// frame with code and reason (cut to 123 bytes; no frame is sent for a code
// that may not appear in one, such as 0, 1005 or 1006), closes the network
// connection and waits for the writer to exit. The flush and close frame are
// bounded by Config.CloseGrace, after which Close closes the connection
// regardless. Close may be called from any goroutine and any number of
// times. It returns nil if the Conn was ended by a Close call, otherwise the
// error that had already ended it (see Err).
func (c *Conn) Close(code int, reason string) error {
	c.end(&Error{Code: code, Reason: reason, Err: &canonical.Error{
		Code: canonical.CodeCanceled, Message: "connection closed", Cause: ErrClosed}}, true)
	c.wait()
	if errors.Is(c.err, ErrClosed) {
		return nil
	}
	return c.err
}

// Done returns a channel closed when the Conn has ended: the writer has
// exited and the network connection is closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns nil while the Conn is open, then why it ended; it is set
// before Done is closed. See Read and Send for the values.
func (c *Conn) Err() error {
	select {
	case <-c.closing:
		return c.err
	default:
		return nil
	}
}

// end starts the Conn's ending with err, once; it reports whether this call
// did. An *Error's close code and reason are sent after the queued frames
// when flush is set, instead of them otherwise. It never blocks.
func (c *Conn) end(err error, flush bool) bool {
	won := false
	c.once.Do(func() {
		c.err, c.flush = err, flush
		if e, ok := err.(*Error); ok && sendable(e.Code) {
			c.code, c.reason = e.Code, truncateReason(e.Reason)
		}
		close(c.closing)
		won = true
	})
	if won {
		c.kick() // the writer finishes the close handshake
	}
	return won
}

// endContext ends the Conn because the context of a Read is done.
func (c *Conn) endContext(err error) {
	c.end(&Error{Code: CloseGoingAway, Err: canonical.AsError(err)}, true)
}

// endRead ends the Conn because the read side failed with err.
func (c *Conn) endRead(err error) {
	select {
	case <-c.closing: // the Conn was ending already and caused err
		return
	default:
	}
	var ne net.Error
	switch {
	case errors.As(err, new(*websocket.CloseError)):
		// The peer's close frame, already answered by gorilla's close
		// handler, or 1006 for a connection dropped without one.
		c.end(err, false)
	case errors.Is(err, websocket.ErrReadLimit):
		// gorilla has sent 1009 already.
		msg := fmt.Sprintf("message exceeds MaxMessageBytes (%d bytes)", c.cfg.MaxMessageBytes)
		c.end(&Error{Code: CloseMessageTooBig, Reason: msg, Err: &canonical.Error{
			Code: canonical.CodeResourceExhausted, Message: msg, Cause: err}}, false)
	case errors.As(err, &ne) && ne.Timeout():
		msg := fmt.Sprintf("no pong within %s (2x PingInterval)", 2*c.cfg.PingInterval)
		c.end(&Error{Code: ClosePolicyViolation, Reason: msg, Err: &canonical.Error{
			Code: canonical.CodeDeadlineExceeded, Message: msg, Cause: err}}, false)
	default:
		// A protocol error (gorilla has sent 1002) or a network failure.
		c.end(&canonical.Error{Code: canonical.CodeUnavailable,
			Message: "websocket read: " + err.Error(), Cause: err}, false)
	}
}

// endWrite ends the Conn because writing failed with err.
func (c *Conn) endWrite(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, websocket.ErrCloseSent):
		// gorilla's read side sent a close frame (an echo, 1009 or 1002)
		// and the Read that did so is ending the Conn with the reason.
	case errors.As(err, &ne) && ne.Timeout():
		msg := fmt.Sprintf("write blocked longer than WriteTimeout (%s)", c.cfg.WriteTimeout)
		if c.end(&Error{Code: ClosePolicyViolation, Reason: msg, Err: &canonical.Error{
			Code: canonical.CodeResourceExhausted, Message: msg, Cause: ErrSlowConsumer}}, false) && c.cfg.SlowConsumers != nil {
			c.cfg.SlowConsumers.Inc() // a peer that stopped reading, as cutOff counts one
		}
	default:
		c.end(&canonical.Error{Code: canonical.CodeUnavailable,
			Message: "websocket write: " + err.Error(), Cause: err}, false)
	}
}

// extendRead moves the read deadline to 2x PingInterval from now, unless
// the Conn is ending.
func (c *Conn) extendRead() {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	select {
	case <-c.closing:
	default:
		_ = c.ws.SetReadDeadline(time.Now().Add(2 * c.cfg.PingInterval))
	}
}

// stopRead unblocks a Read in progress; call it after end.
func (c *Conn) stopRead() {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	_ = c.ws.SetReadDeadline(time.Unix(1, 0))
}

// wait waits for writeLoop to exit, closing the network connection under it
// if it has not within CloseGrace.
func (c *Conn) wait() {
	select {
	case <-c.done:
		return
	default:
	}
	t := time.NewTimer(c.cfg.CloseGrace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		_ = c.ws.Close() // fails writeLoop's pending write
		<-c.done
	}
}

// kick makes sure a writer runs: called after putting in place something
// to write (a frame, the ending). A writer that runs already sees it.
func (c *Conn) kick() {
	if c.take() {
		go c.writeLoop()
	}
}

// take claims the write turn for the caller, who must then run writeLoop;
// false when a writer runs.
func (c *Conn) take() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.writing {
		return false
	}
	c.writing = true
	return true
}

// pingTime is the ping timer's function (a goroutine of its own): a ping
// is due, written by the writer that runs or, when none does, by this
// goroutine as the writer.
func (c *Conn) pingTime() {
	c.wmu.Lock()
	c.pingDue = true
	c.wmu.Unlock()
	if c.take() {
		c.writeLoop()
	}
}

// writeLoop is the Conn's writer while there is something to write: a due
// ping, queued frames, and once the Conn starts to end, the close
// handshake, after which it closes the network connection and keeps the
// write turn for good. Its caller holds the turn (take); it gives it back
// (release) when nothing is left.
func (c *Conn) writeLoop() {
	for {
		select { // an ending Conn stops writing frames at once
		case <-c.closing:
			c.wmu.Lock()
			c.ping.Stop()
			c.wmu.Unlock()
			c.finish()
			_ = c.ws.Close()
			close(c.done)
			return
		default:
		}
		var err error
		switch {
		case c.takePing():
			err = c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.cfg.WriteTimeout))
		case c.out.len() > 0:
			err = c.writeQueued()
		case c.release():
			return
		}
		if err != nil {
			c.endWrite(err)
		}
	}
}

// takePing reports whether a ping is due, clearing it and setting the
// timer for the next.
func (c *Conn) takePing() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.pingDue {
		return false
	}
	c.pingDue = false
	c.ping.Reset(c.cfg.PingInterval)
	return true
}

// release gives the write turn back, unless something to write came while
// the writer looked (a Send or end that found the turn taken relies on
// this look).
func (c *Conn) release() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	select {
	case <-c.closing:
		return false
	default:
	}
	if c.pingDue || c.out.len() > 0 {
		return false
	}
	c.writing = false
	return true
}

// writeQueued writes the frames queued when it starts, held (see
// heldConn) so that they reach the network in one write. It stops early if
// the Conn starts to end. Frames queued meanwhile wait for the next call,
// which comes at once (writeLoop looks again before it lets go): no frame
// waits for another to batch with, and the loop gets to its ping and
// closing cases between bursts.
func (c *Conn) writeQueued() error {
	n := c.out.len()
	c.held.hold()
	deadline := time.Now().Add(c.cfg.WriteTimeout) // one for the burst: see heldConn.SetWriteDeadline
	var err error
burst:
	for ; err == nil && n > 0; n-- {
		select {
		case <-c.closing:
			break burst
		default:
		}
		f, _ := c.out.pop() // only this goroutine takes: n frames are there
		err = c.write(f, deadline)
	}
	if rerr := c.held.release(); err == nil {
		err = rerr
	}
	return err
}

// write writes one data frame.
func (c *Conn) write(f frame, deadline time.Time) error {
	_ = c.ws.SetWriteDeadline(deadline)
	return c.ws.WriteMessage(f.typ, f.data)
}

// finish writes the queued frames if the ending asks for it, then the close
// frame, all within CloseGrace. Frames queued after it are dropped.
func (c *Conn) finish() {
	deadline := time.Now().Add(c.cfg.CloseGrace)
	if c.flush {
		d := deadline
		if t := time.Now().Add(c.cfg.WriteTimeout); t.Before(d) {
			d = t
		}
		c.held.hold()
		var err error
		for err == nil {
			f, ok := c.out.pop()
			if !ok {
				break
			}
			err = c.write(f, d)
		}
		if rerr := c.held.release(); err == nil {
			err = rerr
		}
		if err != nil {
			c.cfg.Logger.Debug("wsconn: flush before close failed", "code", c.code, "err", err)
			return // the write side is broken: no close frame either
		}
	}
	if c.code == 0 {
		return
	}
	err := c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(c.code, c.reason), deadline)
	if err != nil && !errors.Is(err, websocket.ErrCloseSent) {
		c.cfg.Logger.Debug("wsconn: close frame not sent", "code", c.code, "err", err)
	}
}
