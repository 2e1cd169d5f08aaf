package agent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlingua-dev/interlingua/adapters/agent"
)

// heldKV is a thread bucket whose record updates wait, while held, until
// released.
type heldKV struct {
	jetstream.KeyValue
	held    atomic.Bool
	waiting atomic.Int32
	release chan struct{}
}

func (k *heldKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if k.held.Load() {
		k.waiting.Add(1)
		select {
		case <-k.release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return k.KeyValue.Update(ctx, key, value, rev)
}

// TestStepSavesDoNotHoldEvents: the saves of a run's steps are made beside
// the run, not on the path of its events. With the thread bucket's writes
// held, a run's every event (the input's checkpoint, a step, is the
// third) reaches the client; released, the run's final state is what the
// bucket holds, read by another instance.
func TestStepSavesDoNotHoldEvents(t *testing.T) {
	kv := &heldKV{KeyValue: startKV(t), release: make(chan struct{})}
	a := newServer(t, agent.Config{KV: kv})
	_, last := a.runToEnd(t, "held", "stream", user("one"), map[string]any{"deltas": 2}) // creates the record
	kv.held.Store(true)
	st := a.openSSE(t, "held", `{"channels":["lifecycle","messages","values","checkpoints"],"since":`+strconv.FormatUint(last, 10)+`}`, nil)
	// The command's own save waits too: its answer comes once released.
	answered := make(chan error, 1)
	go func() {
		body := `{"id":1,"method":"run.start","params":{"assistant_id":"stream","input":{"messages":[{"role":"user","content":"two"}]},"config":{"configurable":{"deltas":2}}}}`
		resp, err := http.Post(a.URL+"/threads/held/commands", "application/json", strings.NewReader(body))
		if err == nil {
			var r struct{ Type string }
			err = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if err == nil && r.Type != "success" {
				err = &json.UnsupportedValueError{Str: r.Type}
			}
		}
		answered <- err
	}()
	events := st.untilTerminal()
	if n := kv.waiting.Load(); n == 0 {
		t.Fatal("no save was held: the test did not hold the bucket")
	}
	if got := events[len(events)-1].status(); got != "completed" || len(events) < 8 {
		t.Fatalf("with the bucket held: %d events, ending %q", len(events), got)
	}
	close(kv.release)
	if err := <-answered; err != nil {
		t.Fatalf("run.start: %v", err)
	}
	// The final save follows the terminal event: another instance reads it
	// once it is made.
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
		b := newServer(t, agent.Config{KV: kv.KeyValue}) // reads the record afresh
		res := b.command(t, "held", 2, "state.get", map[string]any{"namespace": []string{}, "keys": []string{"messages"}})
		msgs, _ := json.Marshal(res["result"])
		if strings.Count(string(msgs), `"content":"`) == 4 { // two turns: user and ai each
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket after the held run, read by another instance: %s", msgs)
		}
	}
}
