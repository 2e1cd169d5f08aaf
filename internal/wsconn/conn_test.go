package wsconn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/wsconn"
)

// TestSendConcurrent checks the single-writer property: frames sent by 50
// goroutines at once arrive whole, none lost, each goroutine's in the order
// it sent them. The queue holds every frame, so no Send finds it full: this
// test is about interleaving, not backpressure. It runs on a Conn from
// Upgrade, whose writer holds bursts, and on one from New.
func TestSendConcurrent(t *testing.T) {
	t.Run("Upgrade", func(t *testing.T) { testSendConcurrent(t, pair) })
	t.Run("New", func(t *testing.T) { testSendConcurrent(t, plainPair) })
}

func testSendConcurrent(t *testing.T, pair func(testing.TB, wsconn.Config) (*wsconn.Conn, *websocket.Conn)) {
	const senders, perSender = 50, 200
	c, client := pair(t, wsconn.Config{SendQueue: senders * perSender})

	// Every tenth frame exceeds gorilla's 4096-byte write buffer, so it is
	// written in more than one piece that a second writer could split.
	payload := func(g, i int) []byte {
		n := (g + i*7) % 100
		if i%10 == 0 {
			n = 5000 + g
		}
		return fmt.Appendf(nil, "%d %d %s", g, i, bytes.Repeat([]byte{byte('a' + g%26)}, n))
	}
	errs := make(chan error, senders)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range perSender {
				if err := c.Send(t.Context(), websocket.TextMessage, payload(g, i)); err != nil {
					errs <- fmt.Errorf("sender %d frame %d: %w", g, i, err)
					return
				}
			}
		})
	}

	next := make([]int, senders)
	for n := range senders * perSender {
		_ = client.SetReadDeadline(time.Now().Add(timeout))
		_, p, err := client.ReadMessage()
		if err != nil {
			t.Fatalf("client read %d: %v", n, err)
		}
		var g, i int
		if _, err := fmt.Sscanf(string(p), "%d %d", &g, &i); err != nil || g < 0 || g >= senders {
			t.Fatalf("message %d: bad header %.40q", n, p)
		}
		if i != next[g] {
			t.Fatalf("sender %d: got frame %d, want %d", g, i, next[g])
		}
		if want := payload(g, i); !bytes.Equal(p, want) {
			t.Fatalf("sender %d frame %d: %d bytes, corrupt (want %d bytes)", g, i, len(p), len(want))
		}
		next[g]++
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	if err := c.Close(wsconn.CloseNormal, "done"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, ce := readToClose(t, client); ce.Code != wsconn.CloseNormal || ce.Text != "done" {
		t.Fatalf("client got close %d %q, want 1000 \"done\"", ce.Code, ce.Text)
	}
}

// TestSlowConsumer checks that a peer that never reads is cut off once the
// queue is full: Send returns the slow-consumer error and the peer, when it
// reads at last, finds close 1008 after the frames that were in flight.
func TestSlowConsumer(t *testing.T) {
	// CloseGrace leaves the client ample time to start reading after Send
	// fails, so the blocked write, then the close frame, get through.
	cutoffs := &countCalls{}
	c, client := pair(t, wsconn.Config{SendQueue: 4, CloseGrace: timeout, SlowConsumers: cutoffs})
	payload := make([]byte, 64<<10) // fills the socket buffers in a few frames

	var err error
	for range 1_000_000 {
		if err = c.Send(t.Context(), websocket.BinaryMessage, payload); err != nil {
			break
		}
	}
	if !errors.Is(err, wsconn.ErrSlowConsumer) {
		t.Fatalf("Send: %v, want ErrSlowConsumer", err)
	}
	if got := wsconn.CloseCode(err); got != wsconn.ClosePolicyViolation {
		t.Errorf("CloseCode = %d, want 1008", got)
	}
	if got := canonical.CodeOf(err); got != canonical.CodeResourceExhausted {
		t.Errorf("canonical code = %v, want resource_exhausted", got)
	}

	_, ce := readToClose(t, client)
	if ce.Code != wsconn.ClosePolicyViolation || ce.Text != "send queue full (4 frames)" {
		t.Fatalf("client got close %d %q, want 1008 \"send queue full (4 frames)\"", ce.Code, ce.Text)
	}
	waitDone(t, c)
	if got := c.Err(); got != err {
		t.Errorf("Err = %v, want the Send error", got)
	}
	if err := c.SendText([]byte("late")); !errors.Is(err, wsconn.ErrSlowConsumer) {
		t.Errorf("Send after cut-off: %v, want ErrSlowConsumer", err)
	}
	if n := cutoffs.Load(); n != 1 {
		t.Errorf("SlowConsumers counted %d cut-offs, want 1", n)
	}
}

// countCalls is a wsconn.Counter.
type countCalls struct{ atomic.Int32 }

func (c *countCalls) Inc() { c.Add(1) }

// TestWriteTimeout checks that a write blocked past WriteTimeout also cuts
// the peer off as a slow consumer, with room left in the queue.
func TestWriteTimeout(t *testing.T) {
	const frames = 1000 // 64 MiB, more than loopback socket buffers hold
	cutoffs := &countCalls{}
	c, _ := pair(t, wsconn.Config{SendQueue: frames, WriteTimeout: 50 * time.Millisecond, SlowConsumers: cutoffs})
	payload := make([]byte, 64<<10)
	for i := range frames {
		if err := c.Send(t.Context(), websocket.BinaryMessage, payload); err != nil {
			if i == 0 {
				t.Fatalf("first Send: %v", err)
			}
			break // the writer may already have given up
		}
	}
	waitDone(t, c)
	err := c.Err()
	if !errors.Is(err, wsconn.ErrSlowConsumer) || wsconn.CloseCode(err) != wsconn.ClosePolicyViolation {
		t.Fatalf("Err = %v, want ErrSlowConsumer with 1008", err)
	}
	if !strings.Contains(err.Error(), "WriteTimeout") {
		t.Errorf("Err = %q, want it to name WriteTimeout", err)
	}
	if n := cutoffs.Load(); n != 1 {
		t.Errorf("SlowConsumers counted %d cut-offs, want 1", n)
	}
}

// TestReadLimit checks MaxMessageBytes: a message at the limit is read, one
// byte more ends the Conn with 1009 on both sides.
func TestReadLimit(t *testing.T) {
	const limit = 1024
	tests := []struct {
		name string
		size int
		code int // close code expected, 0 for none
	}{
		{"at limit", limit, 0},
		{"over limit", limit + 1, wsconn.CloseMessageTooBig},
		{"far over limit", 64 * limit, wsconn.CloseMessageTooBig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := pair(t, wsconn.Config{MaxMessageBytes: limit})
			msg := bytes.Repeat([]byte("x"), tt.size)
			if err := client.WriteMessage(websocket.BinaryMessage, msg); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			typ, data, err := c.Read(ctx)
			if tt.code == 0 {
				if err != nil || typ != websocket.BinaryMessage || !bytes.Equal(data, msg) {
					t.Fatalf("Read = %d, %d bytes, %v; want the message", typ, len(data), err)
				}
				return
			}
			if got := wsconn.CloseCode(err); got != tt.code {
				t.Fatalf("Read error %v has close code %d, want %d", err, got, tt.code)
			}
			if !errors.Is(err, websocket.ErrReadLimit) || canonical.CodeOf(err) != canonical.CodeResourceExhausted {
				t.Errorf("Read error %v, want ErrReadLimit as resource_exhausted", err)
			}
			if _, ce := readToClose(t, client); ce.Code != tt.code {
				t.Errorf("client got close %d, want %d", ce.Code, tt.code)
			}
			waitDone(t, c)
		})
	}
}

// TestCloseFlushesQueued checks that Close delivers the frames queued before
// it, in order, then its close frame; and that Close is idempotent.
func TestCloseFlushesQueued(t *testing.T) {
	const n = 100
	c, client := pair(t, wsconn.Config{})
	for i := range n {
		if err := c.SendText([]byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	code := wsconn.AppCode(uint32(canonical.CodeNotFound))
	if err := c.Close(code, "bye"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed when Close returned")
	}

	msgs, ce := readToClose(t, client)
	if len(msgs) != n {
		t.Fatalf("client got %d messages before close, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if m != fmt.Sprint(i) {
			t.Fatalf("message %d = %q", i, m)
		}
	}
	if ce.Code != 4005 || ce.Text != "bye" {
		t.Fatalf("client got close %d %q, want 4005 \"bye\"", ce.Code, ce.Text)
	}

	if err := c.Close(wsconn.CloseInternalError, "again"); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	if err := c.Err(); !errors.Is(err, wsconn.ErrClosed) || wsconn.CloseCode(err) != 4005 {
		t.Errorf("Err = %v, want ErrClosed with 4005", err)
	}
	if err := c.SendText([]byte("late")); !errors.Is(err, wsconn.ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
	if _, _, err := c.Read(t.Context()); !errors.Is(err, wsconn.ErrClosed) {
		t.Errorf("Read after Close: %v, want ErrClosed", err)
	}
}

// TestConcurrentClose races Close against Send and Close from many
// goroutines (run it with -race): every call returns and the Conn ends once.
func TestConcurrentClose(t *testing.T) {
	c, _ := pair(t, wsconn.Config{SendQueue: 1 << 16})
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Go(func() {
			if g%2 == 0 {
				_ = c.Close(wsconn.CloseGoingAway, "shutdown")
				return
			}
			for c.SendText([]byte("x")) == nil {
			}
		})
	}
	wg.Wait()
	waitDone(t, c)
	// The senders may fill the queue before a Close runs.
	if err := c.Err(); !errors.Is(err, wsconn.ErrClosed) && !errors.Is(err, wsconn.ErrSlowConsumer) {
		t.Fatalf("Err = %v, want ErrClosed or ErrSlowConsumer", err)
	}
}

// TestPingKeepsIdleConnAlive checks that pongs keep an idle connection past
// several read deadlines (2x PingInterval each).
func TestPingKeepsIdleConnAlive(t *testing.T) {
	// Each pong must arrive within one interval of its ping; 200ms keeps
	// that margin above scheduling stalls on a loaded 2-CPU machine under
	// -race (100ms was not enough).
	const interval = 200 * time.Millisecond
	c, client := pair(t, wsconn.Config{PingInterval: interval})

	pings := make(chan struct{}, 100)
	client.SetPingHandler(func(data string) error {
		select {
		case pings <- struct{}{}:
		default:
		}
		return client.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(timeout))
	})
	clientDone := make(chan error, 1)
	go func() { // the client reads only to answer pings
		_, _, err := client.ReadMessage()
		clientDone <- err
	}()
	got := readAsync(t.Context(), c)

	// The third ping is written 3 intervals after New, past the deadline
	// the Read set when it started: only pongs can have kept the Conn open.
	for i := range 3 {
		select {
		case <-pings:
		case <-time.After(timeout):
			t.Fatalf("ping %d never arrived; Conn error: %v", i, c.Err())
		}
	}
	select {
	case r := <-got:
		t.Fatalf("idle Read ended: %v", r.err)
	default:
	}

	if err := client.WriteMessage(websocket.TextMessage, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || string(r.data) != "still here" {
			t.Fatalf("Read = %q, %v", r.data, r.err)
		}
	case <-time.After(timeout):
		t.Fatal("Read never returned the message")
	}
	if err := c.Close(wsconn.CloseNormal, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-clientDone:
		if !websocket.IsCloseError(err, wsconn.CloseNormal) {
			t.Fatalf("client: %v, want close 1000", err)
		}
	case <-time.After(timeout):
		t.Fatal("client never saw the close")
	}
}

// TestMissedPongCutsOff checks that a peer answering no pings (this client
// never reads, so never pongs) is cut off with 1008 after 2x PingInterval.
func TestMissedPongCutsOff(t *testing.T) {
	c, _ := pair(t, wsconn.Config{PingInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	_, _, err := c.Read(ctx)
	if wsconn.CloseCode(err) != wsconn.ClosePolicyViolation || canonical.CodeOf(err) != canonical.CodeDeadlineExceeded {
		t.Fatalf("Read: %v, want 1008 deadline_exceeded", err)
	}
	waitDone(t, c)
}

// TestReadContext checks that a done context ends a Read, whether it was
// done before the call or becomes done while Read blocks, and that the peer
// is told 1001.
func TestReadContext(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(context.Context) (context.Context, context.CancelFunc)
		want error
	}{
		{"canceled before", func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"deadline while blocked", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 30*time.Millisecond)
		}, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, client := pair(t, wsconn.Config{})
			ctx, cancel := tt.ctx(t.Context())
			defer cancel()
			select {
			case r := <-readAsync(ctx, c):
				if !errors.Is(r.err, tt.want) || wsconn.CloseCode(r.err) != wsconn.CloseGoingAway {
					t.Fatalf("Read: %v, want %v with 1001", r.err, tt.want)
				}
			case <-time.After(timeout):
				t.Fatal("Read not unblocked by its context")
			}
			if _, ce := readToClose(t, client); ce.Code != wsconn.CloseGoingAway {
				t.Errorf("client got close %d, want 1001", ce.Code)
			}
			waitDone(t, c)
		})
	}
}

// TestPeerClose checks that the peer's close frame ends the Conn with the
// peer's *websocket.CloseError.
func TestPeerClose(t *testing.T) {
	c, client := pair(t, wsconn.Config{})
	msg := websocket.FormatCloseMessage(wsconn.CloseGoingAway, "tab closed")
	if err := client.WriteMessage(websocket.CloseMessage, msg); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.Read(t.Context())
	if !websocket.IsCloseError(err, wsconn.CloseGoingAway) || wsconn.CloseCode(err) != wsconn.CloseGoingAway {
		t.Fatalf("Read: %v, want the peer's 1001", err)
	}
	waitDone(t, c)
	if got := c.Close(wsconn.CloseNormal, ""); got != err {
		t.Errorf("Close after peer close = %v, want the peer's close error", got)
	}
}

// TestSendRefusals checks the Send calls refused without ending the Conn.
func TestSendRefusals(t *testing.T) {
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		typ  int
		want canonical.Code
	}{
		{"ping type", t.Context(), websocket.PingMessage, canonical.CodeInvalidArgument},
		{"close type", t.Context(), websocket.CloseMessage, canonical.CodeInvalidArgument},
		{"canceled context", canceled, websocket.TextMessage, canonical.CodeCanceled},
	}
	c, _ := pair(t, wsconn.Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Send(tt.ctx, tt.typ, []byte("x"))
			if canonical.CodeOf(err) != tt.want {
				t.Fatalf("Send: %v, want %v", err, tt.want)
			}
			if err := c.Err(); err != nil {
				t.Fatalf("Conn ended: %v", err)
			}
		})
	}
}

// SendWait holds a producer back while a reading peer catches up: 20,000
// frames through a 4-frame queue all arrive, in order, with no cut-off.
func TestSendWaitIsBackpressure(t *testing.T) {
	c, client := pair(t, wsconn.Config{SendQueue: 4})
	const n = 20_000
	got := make(chan int, 1)
	go func() {
		i := 0
		for ; i < n; i++ {
			_, p, err := client.ReadMessage()
			if err != nil || string(p) != strconv.Itoa(i) {
				break
			}
		}
		got <- i
	}()
	for i := range n {
		if err := c.SendWait(t.Context(), websocket.TextMessage, []byte(strconv.Itoa(i))); err != nil {
			t.Fatalf("SendWait %d: %v", i, err)
		}
	}
	if i := <-got; i != n {
		t.Fatalf("client read %d frames in order, want %d", i, n)
	}
}

// A peer that stops reading is still cut off by SendWait, once the write
// timeout passes.
func TestSendWaitCutsOffStalledPeer(t *testing.T) {
	// The wait (half the write timeout) ends while the writer's blocked write
	// still has about a second left, in which the client starts reading.
	c, client := pair(t, wsconn.Config{SendQueue: 4, WriteTimeout: 2 * time.Second, CloseGrace: timeout})
	payload := make([]byte, 64<<10)
	var err error
	for range 10_000 {
		if err = c.SendWait(t.Context(), websocket.BinaryMessage, payload); err != nil {
			break
		}
	}
	if !errors.Is(err, wsconn.ErrSlowConsumer) {
		t.Fatalf("SendWait: %v, want ErrSlowConsumer", err)
	}
	if _, ce := readToClose(t, client); ce.Code != wsconn.ClosePolicyViolation {
		t.Fatalf("client got close %d, want 1008", ce.Code)
	}
}

// TestQueuedFramesAreOneWrite checks that frames queued together reach the
// network in one write on a Conn made by Upgrade, and one write each on one
// made by New, which holds nothing. The first frame's write is stalled so
// that the rest queue up behind it.
func TestQueuedFramesAreOneWrite(t *testing.T) {
	const n = 100 // behind the first frame; under the default SendQueue
	for _, tt := range []struct {
		name    string
		upgrade bool
		writes  int
	}{{"Upgrade", true, 1}, {"New", false, n}} {
		t.Run(tt.name, func(t *testing.T) {
			c, client, nc := serve(t, wsconn.Config{}, tt.upgrade)
			start := nc.writeCount()
			open := nc.stall()
			if err := c.SendText([]byte("0")); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(timeout); nc.writeCount() == start; {
				if time.Now().After(deadline) {
					t.Fatal("the first frame was never written")
				}
				time.Sleep(time.Millisecond)
			}
			for i := 1; i <= n; i++ {
				if err := c.SendText([]byte(strconv.Itoa(i))); err != nil {
					t.Fatal(err)
				}
			}
			before := nc.writeCount()
			open()
			_ = client.SetReadDeadline(time.Now().Add(timeout))
			for i := 0; i <= n; i++ {
				_, p, err := client.ReadMessage()
				if err != nil || string(p) != strconv.Itoa(i) {
					t.Fatalf("message %d = %q, %v", i, p, err)
				}
			}
			if got := nc.writeCount() - before; got != tt.writes {
				t.Errorf("%d queued frames took %d writes, want %d", n, got, tt.writes)
			}
		})
	}
}

// TestPongsAmidBursts checks that control frames gorilla's read side writes
// while the writer holds a burst (pongs to the client's pings) go out whole
// and between frames: the client reads every data frame in order and a pong
// for every ping. Data frames of 3 KiB make bursts that overflow the held
// bytes (maxHeld) as well as ones that do not.
func TestPongsAmidBursts(t *testing.T) {
	const frames, pings = 5000, 200
	c, client := pair(t, wsconn.Config{SendQueue: frames})
	go func() { // keep reading so that the server answers pings
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	pongs := make(chan struct{}, pings)
	client.SetPongHandler(func(string) error { pongs <- struct{}{}; return nil })
	pingErr := make(chan error, 1)
	go func() {
		for range pings {
			if err := client.WriteControl(websocket.PingMessage, nil, time.Now().Add(timeout)); err != nil {
				pingErr <- err
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
		pingErr <- nil
	}()
	payload := func(i int) string {
		return strconv.Itoa(i) + " " + strings.Repeat("x", i%3000)
	}
	go func() {
		for i := range frames {
			if err := c.SendText([]byte(payload(i))); err != nil {
				return
			}
		}
	}()
	_ = client.SetReadDeadline(time.Now().Add(timeout))
	for i := range frames {
		_, p, err := client.ReadMessage()
		if err != nil || string(p) != payload(i) {
			t.Fatalf("message %d: %d bytes, %v", i, len(p), err)
		}
	}
	if err := <-pingErr; err != nil {
		t.Fatal(err)
	}
	if err := c.SendText([]byte("last")); err != nil { // gets pongs sent after the data read
		t.Fatal(err)
	}
	if _, p, err := client.ReadMessage(); err != nil || string(p) != "last" {
		t.Fatalf("last message = %q, %v", p, err)
	}
	for deadline := time.After(timeout); len(pongs) < pings; {
		// Pongs are handled in ReadMessage; any late ones follow "last".
		select {
		case <-deadline:
			t.Fatalf("%d pongs for %d pings", len(pongs), pings)
		default:
		}
		if err := c.SendText([]byte("more")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := client.ReadMessage(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIdleConnHoldsNoWriter: the writer goroutine runs only while there is
// something to write. Idle connections (their pings answered) hold none;
// a burst of frames starts one, which delivers them all, in order, and
// goes once they are written; a ping is still written to an idle
// connection and Close still sends its close frame.
func TestIdleConnHoldsNoWriter(t *testing.T) {
	const conns, frames = 8, 50
	servers := make([]*wsconn.Conn, conns)
	clients := make([]*websocket.Conn, conns)
	pings := make(chan int, 1000)
	for i := range conns {
		servers[i], clients[i] = pair(t, wsconn.Config{PingInterval: 100 * time.Millisecond})
		clients[i].SetPingHandler(func(data string) error {
			pings <- i
			return clients[i].WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(timeout))
		})
		readAsync(t.Context(), servers[i]) // keeps pongs processed
	}
	waitWriters(t, 0)

	got := make(chan error, conns)
	for i := range conns {
		go func() {
			for n := range frames {
				_, data, err := clients[i].ReadMessage()
				if err == nil && string(data) != strconv.Itoa(n) {
					err = fmt.Errorf("conn %d: frame %d is %q", i, n, data)
				}
				if err != nil {
					got <- err
					return
				}
			}
			got <- nil
		}()
		for n := range frames {
			if err := servers[i].SendText([]byte(strconv.Itoa(n))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range conns {
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(timeout):
			t.Fatal("frames never all arrived")
		}
	}
	waitWriters(t, 0)

	// Each client reads on (for pings and the close frame).
	closed := make(chan error, conns)
	for i := range conns {
		go func() {
			_, _, err := clients[i].ReadMessage()
			closed <- err
		}()
	}
	seen := map[int]bool{}
	for deadline := time.After(timeout); len(seen) < conns; {
		select {
		case i := <-pings:
			seen[i] = true
		case <-deadline:
			t.Fatalf("pings reached %d of %d idle connections", len(seen), conns)
		}
	}
	for _, c := range servers {
		if err := c.Close(wsconn.CloseNormal, ""); err != nil {
			t.Fatal(err)
		}
	}
	for range conns {
		if err := <-closed; !websocket.IsCloseError(err, wsconn.CloseNormal) {
			t.Fatalf("client: %v, want close 1000", err)
		}
	}
}

// waitWriters waits (up to timeout) for exactly n writer goroutines.
func waitWriters(t *testing.T, n int) {
	t.Helper()
	var got int
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		if got = strings.Count(string(buf), "wsconn.(*Conn).writeLoop("); got == n {
			return
		}
	}
	t.Fatalf("%d writer goroutines, want %d", got, n)
}
