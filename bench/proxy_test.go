package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/bench/load"
	"github.com/interlingua-dev/interlingua/protocol"
)

// TestNoopProxyPath: with Proxy, every same-protocol pair gets a third
// path through the no-op reverse proxy (HTTP/1.1 SSE for Triton and the
// agent protocol, WebSocket for Glide, h2c gRPC for Evergreen) on which
// every delta the peer stamped arrives, and the result, its JSON and its
// table carry it. A pair without a direct path has nothing to compare it
// with and gets none.
func TestNoopProxyPath(t *testing.T) {
	// Every protocol with a frontend and a reference upstream.
	peers := names(func(p *protocol.Protocol) bool { return isFrontend(p) && hasPeer(p) })
	if testing.Short() {
		peers = peers[:1]
	}
	for _, p := range peers {
		t.Run(p, func(t *testing.T) {
			const streams, deltas, rounds = 3, 25, 1
			r, err := Run(context.Background(), Options{Frontend: p, Backend: p, Streams: streams, Deltas: deltas, Rounds: rounds, Proxy: true, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if r.Proxy == nil || r.ProxyThroughputRatio == nil || r.ProxyAddedDeltaP50us == nil || r.ProxyAddedTTFDP99us == nil {
				t.Fatalf("proxy path missing: %+v", r)
			}
			for name, s := range map[string]*Side{"direct": r.Direct, "proxy": r.Proxy, "bridged": r.Bridged} {
				if s.Errors != 0 {
					t.Errorf("%s: %d errors, first: %s", name, s.Errors, s.FirstError)
				}
				if s.Deltas != streams*deltas*rounds {
					t.Errorf("%s: %d deltas, want %d", name, s.Deltas, streams*deltas*rounds)
				}
			}
			if want := r.Proxy.DeltaP50us - r.Direct.DeltaP50us; *r.ProxyAddedDeltaP50us != *ptr(want) {
				t.Errorf("proxy_added_delta_p50_us %v, want proxy minus direct %v", *r.ProxyAddedDeltaP50us, want)
			}
			data, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"proxy", "proxy_throughput_ratio", "proxy_added_delta_p50_us", "proxy_added_delta_p99_us", "proxy_added_ttfd_p99_us", "proxy_added_cpu_sec_per_mdelta"} {
				if _, ok := m[k]; !ok {
					t.Errorf("JSON lacks %q", k)
				}
			}
			var b bytes.Buffer
			WriteMarkdown(&b, r)
			if !strings.Contains(b.String(), "\n| figure | direct | no-op proxy | bridged | proxy vs direct | bridged vs direct |\n|---|---:|---:|---:|---:|---:|\n") {
				t.Errorf("table header:\n%s", b.String())
			}
		})
	}
	t.Run("no direct path", func(t *testing.T) {
		r, err := Run(context.Background(), Options{Frontend: "triton", Backend: "scripted", Streams: 1, Deltas: 5, Rounds: 1, Proxy: true})
		if err != nil {
			t.Fatal(err)
		}
		if r.Proxy != nil || r.ProxyThroughputRatio != nil {
			t.Fatalf("a proxy path without a direct one: %+v", r.Proxy)
		}
	})
}

// TestProxyTableRows: each row of the three-path table puts the proxy's
// figure and its comparison with direct beside the bridged ones.
func TestProxyTableRows(t *testing.T) {
	r := &Result{Pair: "triton:triton", Streams: 1, Deltas: 10, Rounds: 1, Procs: 2,
		Direct:  &Side{DeltasPerSec: 1000, DeltaP50us: 100},
		Proxy:   &Side{DeltasPerSec: 900, DeltaP50us: 250},
		Bridged: &Side{DeltasPerSec: 800, DeltaP50us: 300, Errors: 1, FirstError: "boom"}}
	var b bytes.Buffer
	WriteMarkdown(&b, r)
	for _, want := range []string{
		"| deltas/s | 1,000 | 900 | 800 | ×0.90 | ×0.80 |\n",
		"| delta latency p50 (µs) | 100 | 250 | 300 | +150 µs | +200 µs |\n",
		"| errors | 0 | 0 | 1 |  |  |\n",
		"First bridged error: boom\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// The TestNoopProxy* tests: the proxy passes each piece of a stream on as
// it comes, in the ways the harness's protocols stream, and a request body
// the peer reads after its response has begun. Each side waits for the
// other's previous piece before sending its next one, so a proxy that held
// anything back would hang the exchange (and fail on the deadline) rather
// than pass slowly.

// pieces is how many pieces each exchange passes.
const pieces = 5

// streamCtx bounds one exchange.
func streamCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestNoopProxySSE: server-sent events pass one at a time.
func TestNoopProxySSE(t *testing.T) {
	ctx := streamCtx(t)
	next := make(chan struct{})
	px := proxied(t, "http", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range pieces {
			fmt.Fprintf(w, "data: %d\n\n", i)
			if err := rc.Flush(); err != nil {
				return
			}
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	}), false)
	req, _ := http.NewRequestWithContext(ctx, "GET", px.base+"/stream", nil)
	resp, err := px.tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range pieces {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("piece %d: %q, %v", i, line, err)
		}
		_, _ = br.ReadString('\n')
		next <- struct{}{}
	}
}

// TestNoopProxyWebSocket: WebSocket messages pass both ways.
func TestNoopProxyWebSocket(t *testing.T) {
	ctx := streamCtx(t)
	px := proxied(t, "ws", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			kind, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if c.WriteMessage(kind, append([]byte("echo "), msg...)) != nil {
				return
			}
		}
	}), false)
	if !strings.HasPrefix(px.base, "ws://") {
		t.Fatalf("proxy base %q: want the peer's ws scheme", px.base)
	}
	c, _, err := websocket.DefaultDialer.DialContext(ctx, px.base+"/chat", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range pieces {
		if err := c.WriteMessage(websocket.TextMessage, []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		_, msg, err := c.ReadMessage()
		if err != nil || string(msg) != "echo "+strconv.Itoa(i) {
			t.Fatalf("piece %d: %q, %v", i, msg, err)
		}
	}
}

// TestNoopProxyFullDuplex: a body the peer reads after its response has
// begun, over HTTP/1.1 and h2c.
func TestNoopProxyFullDuplex(t *testing.T) {
	ctx := streamCtx(t)
	// gRPC's bidi streams are on h2c; on HTTP/1.1 a peer may answer
	// before the end of a request's body.
	for _, h2c := range []bool{false, true} {
		t.Run(fmt.Sprintf("full duplex h2c=%v", h2c), func(t *testing.T) {
			px := proxied(t, "http", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				if h2c && r.ProtoMajor != 2 {
					http.Error(w, "want HTTP/2, got "+r.Proto, http.StatusHTTPVersionNotSupported)
					return
				}
				if !h2c {
					if err := rc.EnableFullDuplex(); err != nil {
						http.Error(w, err.Error(), http.StatusInternalServerError)
						return
					}
				}
				w.WriteHeader(http.StatusOK)
				_ = rc.Flush()
				br := bufio.NewReader(r.Body)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					_, _ = io.WriteString(w, "echo "+line)
					if rc.Flush() != nil {
						return
					}
				}
			}), h2c)
			pr, pw := io.Pipe()
			defer pw.Close()
			// A proxy that stops reading the body (HTTP/1.1 without full
			// duplex) would block the pipe's writes past the deadline.
			stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
			defer stop()
			req, _ := http.NewRequestWithContext(ctx, "POST", px.base+"/bidi", pr)
			resp, err := px.tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if want := map[bool]int{false: 1, true: 2}[h2c]; resp.StatusCode != http.StatusOK || resp.ProtoMajor != want {
				t.Fatalf("status %d over %s", resp.StatusCode, resp.Proto)
			}
			br := bufio.NewReader(resp.Body)
			for i := range pieces {
				if _, err := fmt.Fprintf(pw, "%d\n", i); err != nil {
					t.Fatal(err)
				}
				line, err := br.ReadString('\n')
				if err != nil || line != fmt.Sprintf("echo %d\n", i) {
					t.Fatalf("piece %d: %q, %v", i, line, err)
				}
			}
		})
	}
}

// proxied serves upstream and starts a no-op proxy in front of it, reached
// with scheme (http, or ws for WebSocket upgrades); both close when the
// test ends. The proxy's transport (the protocol it speaks to its
// upstream) also serves the test as a client of it.
func proxied(t *testing.T, scheme string, upstream http.Handler, h2c bool) *noopProxy {
	t.Helper()
	up, err := load.Serve(upstream, h2c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	px, err := newNoopProxy(scheme+"://"+up.Addr(), h2c, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.close)
	return px
}
