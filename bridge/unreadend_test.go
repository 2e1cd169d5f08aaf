package bridge_test

import (
	"bufio"
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// A run whose client closes it before taking its end, by leaving or by
// being cut off as a slow consumer, still ends in the replay log, once,
// right after its last event there: cancelled, as the client's leaving
// asked. (It used to have no end: an observer later ended it "failed, run
// owner sent neither event nor heartbeat", and a next run of the thread
// followed it as if it had ended.) The replay is read within 3 s, before
// an observer's own end for a quiet owner could come (4.5 s).
func TestRunClosedUnreadEndsInTheLog(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.WriteTimeout = 300 * time.Millisecond
	inst := bridgetest.Start(t, &cfg)
	body := func(thread string) string {
		delay := map[string]string{"unread-left": "1", "unread-slow": "0"}[thread] // fast: the socket's buffers fill at once
		return `{"target":"stream","threadId":"` + thread + `","parameters":{"deltas":100000,"delay_ms":` + delay + `},"inputs":[]}`
	}
	for name, leave := range map[string]func(conn interface{ Close() error }, rd *bufio.Reader){
		"client left": func(conn interface{ Close() error }, rd *bufio.Reader) {
			for range 20 {
				if _, err := rd.ReadString('\n'); err != nil {
					t.Fatal(err)
				}
			}
			conn.Close()
		},
		"slow consumer": func(interface{ Close() error }, *bufio.Reader) {
			bridgetest.WaitCutoffs(t, inst.URL, 1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			thread := "unread-" + map[string]string{"client left": "left", "slow consumer": "slow"}[name]
			conn, rd := bridgetest.StallRequest(t, inst.URL, "/v1/runs", body(thread))
			defer conn.Close()
			leave(conn, rd)
			inst.WaitNoRuns(t)
			evs := replayToEnd(t, inst.URL, thread, 3*time.Second)
			end := evs[len(evs)-1].GetLifecycle()
			if end.GetStatus() != canonical.StatusCancelled {
				t.Fatalf("the run ends %v in the log, want cancelled", end)
			}
			if err := canonical.Validate(evs); err != nil {
				t.Fatal(err)
			}
			for i, ev := range evs {
				if ev.GetSeq() != uint64(i+1) {
					t.Fatalf("event %d has seq %d", i, ev.GetSeq())
				}
			}
		})
	}
}

// replayToEnd reads thread's replay from its start on base up to the
// first terminal event, within d.
func replayToEnd(t *testing.T, base, thread string, d time.Duration) []*canonical.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/threads/"+thread+"/events?since=0", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var evs []*canonical.Event
	for sc.Scan() {
		ev := &canonical.Event{}
		if err := protojson.Unmarshal(sc.Bytes(), ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if _, ok := canonical.TerminalOf(ev); ok {
			return evs
		}
	}
	t.Fatalf("the replay has %d events and no end within %s: %v", len(evs), d, sc.Err())
	return nil
}
