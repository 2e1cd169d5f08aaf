package wsconn

import "sync"

// sendQueue is a Conn's bounded queue of frames for its writer. It holds
// memory only for what it holds: a channel of SendQueue frames was
// allocated whole with every connection (8 KiB at the default 256 frames,
// 32 KiB at the Glide frontend's 1024), the largest part of an idle
// connection's heap; this queue's array grows as frames wait and is let go
// once the writer has drained a large one.
type sendQueue struct {
	mu     sync.Mutex
	frames []frame // frames[head:] wait, oldest first
	head   int
	max    int
	// room is signalled (without blocking) when the writer takes frames,
	// for a SendWait that found the queue full.
	room chan struct{}
}

// keptFrames is the most frames' worth of array a drained queue keeps for
// the next burst; a larger one goes back to the heap.
const keptFrames = 16

func newSendQueue(max int) *sendQueue {
	return &sendQueue{max: max, room: make(chan struct{}, 1)}
}

// push adds f, or reports false when max frames already wait.
func (q *sendQueue) push(f frame) bool {
	q.mu.Lock()
	if len(q.frames)-q.head >= q.max {
		q.mu.Unlock()
		return false
	}
	if q.head > 0 && len(q.frames) == cap(q.frames) { // reuse the taken front
		n := copy(q.frames, q.frames[q.head:])
		clear(q.frames[n:])
		q.frames, q.head = q.frames[:n], 0
	}
	q.frames = append(q.frames, f)
	q.mu.Unlock()
	return true
}

// pop takes the oldest frame; false when none waits.
func (q *sendQueue) pop() (frame, bool) {
	q.mu.Lock()
	if q.head == len(q.frames) {
		q.mu.Unlock()
		return frame{}, false
	}
	f := q.frames[q.head]
	q.frames[q.head] = frame{}
	q.head++
	if q.head == len(q.frames) { // drained
		q.head = 0
		q.frames = q.frames[:0]
		if cap(q.frames) > keptFrames {
			q.frames = nil
		}
	}
	q.mu.Unlock()
	signal(q.room)
	return f, true
}

// len is how many frames wait.
func (q *sendQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.frames) - q.head
}

// signal wakes the one waiter of c, if any, without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
