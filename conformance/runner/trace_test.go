package runner

import (
	"context"
	"strings"
	"testing"
)

func TestWireViewDecodesWebSocketFrames(t *testing.T) {
	v := &wireView{}
	head := "GET /x HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"
	payload := []byte(`{"id":"1"}`)
	key := []byte{1, 2, 3, 4}
	frame := []byte{0x81, 0x80 | byte(len(payload))}
	frame = append(frame, key...)
	for i, c := range payload {
		frame = append(frame, c^key[i%4])
	}
	got := v.render(append([]byte(head), frame[:5]...)) + "\n" + v.render(frame[5:])
	if !strings.Contains(got, "GET /x HTTP/1.1") || !strings.Contains(got, `[ws text, masked] {"id":"1"}`) {
		t.Fatalf("rendered:\n%s", got)
	}
	plain := (&wireView{}).render([]byte("HTTP/1.1 200 OK\r\n\r\ndata: x\n\n"))
	if !strings.Contains(plain, "data: x") {
		t.Fatalf("rendered:\n%s", plain)
	}
}

// --trace records both wire sides and the canonical events of a case.
func TestTrace(t *testing.T) {
	rep, err := Run(context.Background(), Options{Trace: true, Run: []string{"bridge/frontend:native/backend:triton/unicode-split"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 1 || rep.Results[0].Outcome != Pass {
		t.Fatalf("results %+v", rep.Results)
	}
	tr := rep.Results[0].Trace
	for _, want := range []string{"client   conn 1 → ", "POST /v1/runs", "upstream conn 1 → ", "/generate_stream", `" \xf0\x9f"`, "client   event "} {
		if !strings.Contains(tr, want) {
			t.Errorf("trace lacks %q:\n%s", want, tr)
		}
	}
}
