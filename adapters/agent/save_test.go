package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/adapters/agent"
	"github.com/interlingua-dev/interlingua/canonical"
)

// heldStore is a thread store whose writes wait, while held, until
// released.
type heldStore struct {
	canonical.ThreadStore
	held    atomic.Bool
	waiting atomic.Int32
	release chan struct{}
}

func (k *heldStore) Put(ctx context.Context, thread, key string, value []byte, rev uint64) (uint64, error) {
	if err := k.hold(ctx); err != nil {
		return 0, err
	}
	return k.ThreadStore.Put(ctx, thread, key, value, rev)
}

// hold waits, while the store is held, until it is released.
func (k *heldStore) hold(ctx context.Context) error {
	if !k.held.Load() {
		return nil
	}
	k.waiting.Add(1)
	select {
	case <-k.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// postRunStart posts run.start with input text on thread (config is the
// JSON of its configurable) and reports anything but a success answer.
func postRunStart(base, thread, text, config string) error {
	body := `{"id":1,"method":"run.start","params":{"assistant_id":"stream","input":{"messages":[{"role":"user","content":"` + text + `"}]},"config":{"configurable":` + config + `}}}`
	resp, err := http.Post(base+"/threads/"+thread+"/commands", "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r struct{ Type string }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err
	}
	if r.Type != "success" {
		return &json.UnsupportedValueError{Str: r.Type}
	}
	return nil
}

// TestStepSavesDoNotHoldEvents: the saves of run.start and of a run's
// steps are made beside the run, not on the path of the command's answer
// or of the run's events. With the thread store's writes held, run.start
// is answered and the run's events reach the client up to its last step
// (the input's checkpoint, its first, is the third event); released, the
// run ends, and its final state is what the store holds, read by another
// instance.
func TestStepSavesDoNotHoldEvents(t *testing.T) {
	kv := &heldStore{ThreadStore: startStore(t), release: make(chan struct{})}
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(kv.release) }) }) // (runs after the servers close: registered first)
	// A held save waits past every wait of the test (not ended by StoreTimeout).
	a := newServer(t, agent.Config{Store: kv, StoreTimeout: 3 * wait})
	_, last := a.runToEnd(t, "held", "stream", user("one"), map[string]any{"deltas": 2}) // creates the record
	kv.held.Store(true)
	st := a.openSSE(t, "held", `{"channels":["lifecycle","messages","values","checkpoints"],"since":`+strconv.FormatUint(last, 10)+`}`, nil)
	answered := make(chan error, 1)
	go func() { answered <- postRunStart(a.URL, "held", "two", `{"deltas":2}`) }()
	// run.start is answered without waiting for its save, which is held.
	if err := <-answered; err != nil {
		t.Fatalf("run.start: %v", err)
	}
	// Up to the run's second step, its last before its end.
	var methods []string
	for checkpoints := 0; checkpoints < 2; {
		e := st.envelope()
		methods = append(methods, e.Method)
		if e.Method == "checkpoints" {
			checkpoints++
		}
	}
	// The step's save runs on a goroutine of its own, which a loaded
	// machine may start after the events were read.
	for deadline := time.Now().Add(wait); kv.waiting.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no save was held: the test did not hold the store")
		}
	}
	if !slices.Contains(methods, "messages") {
		t.Fatalf("with the store held: %v", methods)
	}
	// The state as of that step is saved before the run's end is seen.
	release.Do(func() { close(kv.release) })
	if e := st.untilTerminal(); e[len(e)-1].status() != "completed" {
		t.Fatalf("the run ended %q", e[len(e)-1].status())
	}
	// The final save follows the terminal event: another instance reads it
	// once it is made.
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
		b := newServer(t, agent.Config{Store: kv.ThreadStore}) // reads the record afresh
		res := b.command(t, "held", 2, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
		msgs, _ := json.Marshal(res["result"])
		if strings.Count(string(msgs), `"content":"`) == 4 { // two turns: user and ai each
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store after the held run, read by another instance: %s", msgs)
		}
	}
}

// recordingStore is a thread store that keeps the status and seq of every
// head record written, in order of the writes' completion, each of which
// (checkpoints' too) takes delay longer.
type recordingStore struct {
	canonical.ThreadStore
	delay  time.Duration
	mu     sync.Mutex
	writes []savedRecord
}

type savedRecord struct {
	Status string `json:"status"`
	Seq    uint64 `json:"seq"`
}

func (k *recordingStore) note(value []byte) {
	var r savedRecord
	_ = json.Unmarshal(value, &r)
	k.mu.Lock()
	k.writes = append(k.writes, r)
	k.mu.Unlock()
}

func (k *recordingStore) Put(ctx context.Context, thread, key string, value []byte, rev uint64) (uint64, error) {
	time.Sleep(k.delay)
	rev, err := k.ThreadStore.Put(ctx, thread, key, value, rev)
	if key == "agent" { // the head record
		k.note(value)
	}
	return rev, err
}

func (k *recordingStore) all() []savedRecord {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.writes)
}

// TestRunEndIsOneSave: a run's end is saved once, before its terminal
// event reaches a client: with writes taking 20 ms, the record written
// last when the client sees the end is the ended run's (status completed,
// the terminal event's seq), and nothing is written after it.
func TestRunEndIsOneSave(t *testing.T) {
	kv := &recordingStore{ThreadStore: startStore(t), delay: 20 * time.Millisecond}
	s := newServer(t, agent.Config{Store: kv})
	s.runToEnd(t, "once", "stream", user("one"), map[string]any{"deltas": 2})
	_, last := s.runToEnd(t, "once", "stream", user("two"), map[string]any{"deltas": 2})
	seen := kv.all()
	if w := seen[len(seen)-1]; w.Status != "completed" || w.Seq != last {
		t.Fatalf("last write when the client saw the end (seq %d): %+v; all: %+v", last, w, seen)
	}
	s.fe.Close() // waits for the run's goroutines
	if after := kv.all(); len(after) != len(seen) {
		t.Fatalf("written after the client saw the end: %+v", after[len(seen):])
	}
}

// TestFirstSaveWhenAlone: a thread's first save, which creates its record,
// is made before run.start is answered, so that another instance asked for
// the thread finds it; a frontend that is Alone answers with the create
// held, and the record is made beside the run.
func TestFirstSaveWhenAlone(t *testing.T) {
	for _, alone := range []bool{false, true} {
		t.Run(fmt.Sprintf("alone=%v", alone), func(t *testing.T) {
			kv := &heldStore{ThreadStore: startStore(t), release: make(chan struct{})}
			var release sync.Once
			t.Cleanup(func() { release.Do(func() { close(kv.release) }) })
			kv.held.Store(true)
			a := newServer(t, agent.Config{Store: kv, StoreTimeout: 3 * wait, Alone: alone})
			answered := make(chan error, 1)
			go func() { answered <- postRunStart(a.URL, "fresh", "one", `{"deltas":2}`) }()
			if alone {
				select {
				case err := <-answered:
					if err != nil {
						t.Fatalf("run.start: %v", err)
					}
				case <-time.After(wait):
					release.Do(func() { close(kv.release) }) // the server's close waits for its saves
					t.Fatal("run.start waited for the held create")
				}
			} else {
				select {
				case err := <-answered:
					t.Fatalf("run.start answered (%v) before the thread's record was made", err)
				case <-time.After(300 * time.Millisecond):
				}
			}
			for deadline := time.Now().Add(wait); kv.waiting.Load() == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no save was held: the test did not hold the store")
				}
			}
			release.Do(func() { close(kv.release) })
			if !alone {
				if err := <-answered; err != nil {
					t.Fatalf("run.start: %v", err)
				}
			}
			for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
				if _, _, err := kv.Get(context.Background(), "fresh", "agent"); err == nil {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("the thread's record: %v", err)
				}
			}
		})
	}
}
