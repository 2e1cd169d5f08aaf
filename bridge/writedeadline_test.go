package bridge_test

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
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
	for _, tc := range []struct{ path, body string }{
		{"/v2/models/stream/generate_stream", `{"text_input":"x","stream":true,"parameters":{"deltas":100000,"delta_text":"` + big + `"}}`},
		{"/v1/xml/stream", `{"target":"stream","input":"x","parameters":{"deltas":100000,"delta_text":"` + big + `"}}`},
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
			// Never read. The run starts, fills the socket's buffers, and
			// its next write must fail within the timeout.
			deadline := time.Now().Add(20 * time.Second)
			started := false
			for {
				n := inst.Bridge().Running()
				if n > 0 {
					started = true
				}
				if started && n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("run still running (started %v) 20 s after its client stopped reading", started)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	resp, err := http.Get(inst.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(m), `interlingua_slow_consumer_cutoffs_total{protocol="http"} 2`) {
		t.Fatalf("cut-offs not counted:\n%s", grepLines(string(m), "slow_consumer"))
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
