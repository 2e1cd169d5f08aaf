package bridge_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// A run on demo-agent publishes every event on
// interlingua.events.<thread>.<run>, and a plain nats.go subscriber on the
// embedded server receives all of them, in order, as canonical Events.
func TestEventsOnEmbeddedNATS(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.NATS.EmbeddedListen = "127.0.0.1:0"
	inst := bridgetest.Start(t, &cfg)
	url := inst.Fabric().EmbeddedURL()
	if url == "" {
		t.Fatal("embedded server is not listening")
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 1024)
	sub, err := nc.ChanSubscribe("interlingua.events.thread-nats.>", msgs)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	body := `{"target":"demo-agent","threadId":"thread-nats","runId":"run-nats","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(inst.URL+"/v1/runs", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	wire, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := bytes.Split(bytes.TrimSpace(wire), []byte("\n"))
	if resp.StatusCode != 200 || len(lines) < 10 {
		t.Fatalf("status %d, %d lines: %s", resp.StatusCode, len(lines), wire)
	}

	var got []*canonical.Event
	timeout := time.After(10 * time.Second)
	for len(got) < len(lines) {
		select {
		case m := <-msgs:
			if m.Subject != "interlingua.events.thread-nats.run-nats" {
				t.Fatalf("subject %q", m.Subject)
			}
			ev := &canonical.Event{}
			if err := proto.Unmarshal(m.Data, ev); err != nil {
				t.Fatalf("event %d does not decode: %v", len(got), err)
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("received %d of %d events", len(got), len(lines))
		}
	}
	if err := canonical.Validate(got); err != nil {
		t.Fatal(err)
	}
	for i, ev := range got {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d: out of order", i, ev.GetSeq())
		}
		var line map[string]any
		_ = json.Unmarshal(lines[i], &line)
		if line["seq"] != strconv.FormatUint(ev.GetSeq(), 10) { // protojson writes uint64 as a string
			t.Fatalf("NATS event %d (seq %d) differs from the HTTP stream's (%v)", i, ev.GetSeq(), line["seq"])
		}
	}
	if st, ok := canonical.TerminalOf(got[len(got)-1]); !ok || st != canonical.StatusCompleted {
		t.Fatalf("last event %v", got[len(got)-1])
	}
}

func TestReadyz(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := client.Get(inst.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s = %d", p, resp.StatusCode)
		}
	}
}
