package evergreen_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/interlingua-dev/interlingua/adapters/evergreen"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
)

// A gRPC session (grpc-go) that receives no message and runs no action for
// idle_timeout is aborted with DEADLINE_EXCEEDED naming the option; a
// running action is not idleness however long it takes, and the bound
// counts again from its end.
func TestIdleSessionAborted(t *testing.T) {
	const idle = 300 * time.Millisecond
	srv, _ := standalone(t, evergreen.FrontendConfig{IdleTimeout: idle})
	conn, err := grpc.NewClient("passthrough:///"+strings.TrimPrefix(srv.URL, "http://"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	desc := &grpc.StreamDesc{StreamName: "StartSession", ServerStreams: true, ClientStreams: true}
	// session sends msgs, never half-closes, and reads until the status.
	session := func(msgs ...*ev.SessionMessage) ([]*ev.SessionMessage, time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		cs, err := conn.NewStream(ctx, desc, startSession)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := cs.SendMsg(m); err != nil {
				t.Fatal(err)
			}
		}
		var got []*ev.SessionMessage
		for {
			m := &ev.SessionMessage{}
			if err := cs.RecvMsg(m); err != nil {
				return got, time.Since(start), err
			}
			got = append(got, m)
		}
	}
	want := "session idle for 300ms: no message received and no action running (idle_timeout)"

	_, took, err := session()
	if s, _ := status.FromError(err); s.Code() != codes.DeadlineExceeded || s.Message() != want {
		t.Fatalf("silent session: %v, want DEADLINE_EXCEEDED %q", err, want)
	}
	if took < idle || took > 5*time.Second {
		t.Errorf("silent session aborted after %v, idle_timeout %v", took, idle)
	}

	// Six deltas 100 ms apart: the action runs twice as long as the bound.
	action := withParams(generate("stream", "p1", "response=r1"), map[string]any{"deltas": 6, "delay_ms": 100})
	msgs, took, err := session(action, frags(textNode("p1", "go")))
	if s, _ := status.FromError(err); s.Code() != codes.DeadlineExceeded || s.Message() != want {
		t.Fatalf("session after its action: %v, want DEADLINE_EXCEEDED %q", err, want)
	}
	if got := reassemble(t, msgs, true).mustText("r1"); got != strings.Repeat("tok ", 6) {
		t.Errorf("the action's output %q: cut short", got)
	}
	if took < 600*time.Millisecond+idle {
		t.Errorf("aborted after %v: before the action's 600 ms and idle_timeout after it", took)
	}

	// The WebSocket transport (its pings answered by the client) ends the
	// same way: close 4000 + DEADLINE_EXCEEDED (4), the message as reason.
	c := wsDial(t, srv.URL, "")
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4004 || ce.Text != want {
		t.Errorf("silent WebSocket session: %v, want close 4004 %q", err, want)
	}
}
