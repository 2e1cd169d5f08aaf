package evergreen_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
)

// envelope is one gRPC length-prefixed message.
func envelope(t *testing.T, m *ev.SessionMessage) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return append(out, b...)
}

// To a client that accepts gzip, the frontend compresses only messages of
// 1 KiB or more: per-token fragments go out plain, a large one gzipped.
func TestCompressesOnlyLargeMessages(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	for _, tc := range []struct {
		name       string
		delta      string
		compressed bool
	}{
		{"token", "tok ", false},
		{"large", strings.Repeat("long text ", 200), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body bytes.Buffer
			body.Write(envelope(t, withParams(generate("stream", "p", "response=r"), map[string]any{"deltas": 3, "delta_text": tc.delta})))
			body.Write(envelope(t, frags(textNode("p", "hi", "user"))))
			req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, inst.URL+startSession, &body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Grpc-Accept-Encoding", "gzip")
			req.Header.Set("Te", "trailers")
			hc := h2c()
			defer hc.CloseIdleConnections()
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			wire, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if st := resp.Trailer.Get("Grpc-Status"); st != "0" {
				t.Fatalf("grpc-status %q: %s", st, resp.Trailer.Get("Grpc-Message"))
			}
			text := ""
			for len(wire) >= 5 {
				flag, n := wire[0], binary.BigEndian.Uint32(wire[1:5])
				payload := wire[5 : 5+n]
				wire = wire[5+n:]
				if flag == 1 {
					zr, err := gzip.NewReader(bytes.NewReader(payload))
					if err != nil {
						t.Fatal(err)
					}
					if payload, err = io.ReadAll(zr); err != nil {
						t.Fatal(err)
					}
				}
				m := &ev.SessionMessage{}
				if err := proto.Unmarshal(payload, m); err != nil {
					t.Fatal(err)
				}
				for _, f := range m.GetNodeFragments() {
					if d := f.GetChunkFragment().GetData(); len(d) > 0 {
						if got := flag == 1; got != tc.compressed || (len(payload) >= 1024) != tc.compressed {
							t.Fatalf("a %d-byte message with compressed flag %d", len(payload), flag)
						}
						text += string(d)
					}
				}
			}
			if text != strings.Repeat(tc.delta, 3) {
				t.Fatalf("text %q", text)
			}
		})
	}
}
