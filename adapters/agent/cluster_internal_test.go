package agent

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// A mirror message decodes to the record it was made from, and starts
// with the prefix its own frontend skips without decoding.
func TestMirrorMessageRoundTrip(t *testing.T) {
	f, err := NewFrontend(Config{Runner: nopRunner{}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, rec := range []record{
		{seq: 7, method: methodMessages, ns: []string{}, frame: []byte(`{"type":"event","seq":7}`)},
		{seq: 8, method: methodCustom, custom: "x\"y", ns: []string{"agent:1", "tools:2"}, frame: []byte(`{"a":"é"}`)},
		{seq: 9, method: methodLifecycle, ns: []string{}, frame: []byte(`{}`), run: "run-1", status: "running"},
	} {
		b := appendMirrorMsg(nil, f.origin, &rec)
		if !bytes.HasPrefix(b, f.echo) {
			t.Fatalf("%s does not start with %s", b, f.echo)
		}
		var m mirrorMsg
		if err := json.Unmarshal(b, &m, mirrorJSON); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		got := record{seq: m.Seq, method: m.Method, custom: m.Custom, ns: m.NS, frame: m.Frame, run: m.Run, status: m.Status}
		if d := cmp.Diff(rec, got, cmp.AllowUnexported(record{})); d != "" || m.Origin != f.origin || m.Pinned {
			t.Fatalf("round trip (-want +got): %s, origin %q, pinned %v", d, m.Origin, m.Pinned)
		}
		var p mirrorMsg // a replay's pinned state
		if err := json.Unmarshal(appendMirrorMsgPinned(nil, f.origin, &rec, true), &p, mirrorJSON); err != nil || !p.Pinned || p.Seq != rec.seq {
			t.Fatalf("pinned: %+v %v", p, err)
		}
	}
}
