package bridge_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/gen/evergreen/v2/evergreenv2connect"
)

// A client that sends its request and never reads the streamed answer is
// cut off within write_timeout on every streaming path, its run cancelled
// (nothing left running) and the cut-off counted; the server serves others.
func TestStalledReaderCutOff(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.WriteTimeout = 300 * time.Millisecond
	inst := bridgetest.Start(t, &cfg)
	addr := strings.TrimPrefix(inst.URL, "http://")
	big := strings.Repeat("x", 4096)
	for i, tc := range []struct{ path, body string }{
		{"/v2/models/stream/generate_stream", `{"text_input":"x","stream":true,"parameters":{"deltas":100000,"delta_text":"` + big + `"}}`},
		{"/v1/xml/stream", `{"target":"stream","input":"x","parameters":{"deltas":100000,"delta_text":"` + big + `"}}`},
		{"/v1/runs", `{"target":"stream","parameters":{"deltas":100000,"delta_text":"` + big + `"},"inputs":[]}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if tcp, ok := conn.(*net.TCPConn); ok {
				_ = tcp.SetReadBuffer(4096) // the kernel holds little for us
			}
			_, err = io.WriteString(conn, "POST "+tc.path+" HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\n"+
				"Content-Length: "+strconv.Itoa(len(tc.body))+"\r\n\r\n"+tc.body)
			if err != nil {
				t.Fatal(err)
			}
			// Never read. The run fills the socket's buffers, its next
			// write fails within the timeout, and the run ends.
			waitCutoffs(t, inst.URL, i+1)
			waitNoRuns(t, inst)
		})
	}
}

// waitNoRuns waits up to 20 s for the runs of a cut-off client to end.
func waitNoRuns(t *testing.T, inst *bridgetest.Instance) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for inst.Bridge().Running() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("run still running 20 s after its client was cut off")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCutoffs waits up to 60 s for /metrics to count n HTTP cut-offs.
func waitCutoffs(t *testing.T, base string, n int) {
	t.Helper()
	want := `interlingua_slow_consumer_cutoffs_total{protocol="http"} ` + strconv.Itoa(n)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		m, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(m), want+"\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 60 s:\n%s", want, grepLines(string(m), "slow_consumer"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// An Evergreen gRPC client (HTTP/2) that stops reading its session is cut
// off the same way: HTTP/2 flow control blocks the server's writes once the
// client's window is full, and the write deadline ends them.
func TestStalledEvergreenReaderCutOff(t *testing.T) {
	cfg := bridge.DefaultConfig()
	cfg.WriteTimeout = 300 * time.Millisecond
	inst := bridgetest.Start(t, &cfg)
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	es := evergreenv2connect.NewEvergreenServiceClient(hc, inst.URL, connect.WithGRPC()).StartSession(ctx)
	// Large deltas fill the client's flow-control window (4 MiB) in a few
	// dozen writes, even under the race detector.
	params, _ := structpb.NewStruct(map[string]any{"deltas": 20000, "delta_text": strings.Repeat("x", 64<<10)})
	cfgAny, _ := anypb.New(params)
	if err := es.Send(&ev.SessionMessage{
		NodeFragments: []*ev.NodeFragment{{Id: "p", ChunkFragment: &ev.Chunk{Metadata: &ev.ChunkMetadata{Mimetype: "text/plain", Role: "user"}, Payload: &ev.Chunk_Data{Data: []byte("hi")}}}},
		Actions: []*ev.Action{{Name: "GENERATE", TargetSpec: &ev.TargetSpec{Id: "stream"}, Configs: []*anypb.Any{cfgAny},
			Inputs: []*ev.NamedParameter{{Name: "prompt", Id: "p"}}, Outputs: []*ev.NamedParameter{{Name: "response", Id: "r"}}}},
	}); err != nil {
		t.Fatal(err)
	}
	// Never Receive.
	waitCutoffs(t, inst.URL, 1)
	waitNoRuns(t, inst)
}
