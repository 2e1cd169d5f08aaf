// Package burst reads a run's canonical stream on a goroutine of its own,
// a burst at a time, so a frontend can write keepalives (OpenAI's SSE
// comments, Anthropic's pings) while Recv waits: the frontends that must
// speak during a silent upstream share it.
package burst

import "github.com/interlingua-dev/interlingua/canonical"

// MaxEvents bounds the events of one batch.
const MaxEvents = 256

// Batch is what the receiving goroutine hands the writer: the events Recv
// returned without waiting, or the error that ended them.
type Batch struct {
	Events []*canonical.Event
	Err    error
}

// Receiver reads a stream on its own goroutine. Close stops it and waits
// for it.
type Receiver struct {
	stream canonical.Stream
	out    chan Batch
	quit   chan struct{}
	done   chan struct{}
}

// New starts receiving stream.
func New(stream canonical.Stream) *Receiver {
	r := &Receiver{stream: stream, out: make(chan Batch), quit: make(chan struct{}), done: make(chan struct{})}
	go r.recvLoop()
	return r
}

// C delivers the batches; the last one carries the error (io.EOF after
// the terminal event).
func (r *Receiver) C() <-chan Batch { return r.out }

// recvLoop receives events, a burst at a time (what Buffered says is at
// hand, at most MaxEvents), until the stream ends or the writer quits.
func (r *Receiver) recvLoop() {
	defer close(r.done)
	ready, _ := r.stream.(canonical.Buffered)
	for {
		var b Batch
		ev, err := r.stream.Recv()
		if err != nil {
			b.Err = err
		} else {
			b.Events = append(b.Events, ev)
			for ready != nil && ready.Buffered() > 0 && len(b.Events) < MaxEvents {
				ev, err := r.stream.Recv()
				if err != nil {
					b.Err = err
					break
				}
				b.Events = append(b.Events, ev)
			}
		}
		select {
		case r.out <- b:
		case <-r.quit:
			return
		}
		if b.Err != nil {
			return
		}
	}
}

// Close stops the receiver: the stream is closed (unblocking Recv, and
// cancelling the run if it has not ended) and the goroutine waited for.
func (r *Receiver) Close() {
	close(r.quit)
	_ = r.stream.Close()
	<-r.done
}
