package triton

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/chunk"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// decodeChunks runs a stream decoder over chunks as the backend's stream
// does, ending the run on an error. It checks the decoder's own buffers
// stay within bounds.
func decodeChunks(t testing.TB, chunks [][]byte, cumulative bool, maxEvent int) []*canonical.Event {
	t.Helper()
	d := newStreamDecoder(cumulative, maxEvent, 200, "run-")
	out := d.b.Lifecycle(nil, canonical.StatusRunning)
	err := chunk.Feed(chunks, func(c []byte) (err error) {
		if out, err = d.Feed(c, out); err == nil && (len(d.prev) > maxEvent || cap(d.resp.text) > 4*maxEvent+64) {
			t.Fatalf("decoder holds %d bytes of text and %d of its reader's, limit %d", len(d.prev), cap(d.resp.text), maxEvent)
		}
		return err
	})
	if err != nil {
		out = d.Fail(out, err)
	}
	if !d.Ended() {
		if out, err = d.End(out); err != nil {
			out = d.Fail(out, err)
		}
	}
	if !d.Ended() {
		t.Fatal("decoder did not end the run")
	}
	return out
}

// eventsJSON renders events one compact proto3 JSON object per line.
func eventsJSON(t testing.TB, events []*canonical.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range events {
		b, err := protojson.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		v := json.Value(b)
		if err := v.Compact(); err != nil {
			t.Fatal(err)
		}
		buf.Write(v)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// golden compares got with the file, or rewrites it under -update.
func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-want +got):\n%s", file, cmp.Diff(string(want), string(got)))
	}
}

type wireCase struct {
	name       string
	wire       []byte
	cumulative bool
	object     bool
}

func wireCases(t testing.TB) []wireCase {
	files, err := filepath.Glob("testdata/stream/*")
	if err != nil {
		t.Fatal(err)
	}
	var cases []wireCase
	for _, f := range files {
		if strings.HasSuffix(f, ".events") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, wireCase{name: f, wire: data, cumulative: strings.Contains(f, ".cumulative."), object: strings.HasSuffix(f, ".json")})
	}
	return cases
}

// TestStreamDecoderGolden decodes each recorded upstream body into
// canonical events, compared with testdata/stream/<case>.events.
func TestStreamDecoderGolden(t *testing.T) {
	for _, c := range wireCases(t) {
		t.Run(filepath.Base(c.name), func(t *testing.T) {
			var events []*canonical.Event
			if c.object {
				d := newStreamDecoder(false, 1<<20, 200, "run-")
				var err error
				if events, err = d.Object(c.wire, nil); err != nil {
					events = d.Fail(events, err)
				}
			} else {
				events = decodeChunks(t, [][]byte{c.wire}, c.cumulative, 1<<20)
			}
			if err := canonical.Validate(events); err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".events", eventsJSON(t, events))
		})
	}
}

// TestStreamDecoderRechunk feeds every recorded body cut at random points
// and a byte at a time: the events never depend on the cuts.
func TestStreamDecoderRechunk(t *testing.T) {
	for _, c := range wireCases(t) {
		if c.object {
			continue
		}
		want := decodeChunks(t, [][]byte{c.wire}, c.cumulative, 1<<20)
		for seed := uint64(0); seed < 64; seed++ {
			got := decodeChunks(t, chunk.Split(c.wire, seed, 1+int(seed%16)), c.cumulative, 1<<20)
			if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
				t.Fatalf("%s seed %d:\n%s", c.name, seed, d)
			}
		}
		if d := cmp.Diff(want, decodeChunks(t, chunk.Bytes(c.wire), c.cumulative, 1<<20), protocmp.Transform()); d != "" {
			t.Fatalf("%s byte by byte:\n%s", c.name, d)
		}
	}
}

func TestStreamDecoderEventLimit(t *testing.T) {
	wire := []byte(`data: {"text_output":"` + strings.Repeat("x", 200) + "\"}\n\n")
	events := decodeChunks(t, chunk.Split(wire, 1, 7), false, 100)
	if err := canonical.Validate(events); err != nil {
		t.Fatal(err)
	}
	lc := events[len(events)-1].GetLifecycle()
	if lc.GetStatus() != canonical.StatusFailed || canonical.Code(lc.GetError().GetCode()) != canonical.CodeResourceExhausted ||
		!strings.Contains(lc.GetError().GetMessage(), "MaxEventBytes (100 bytes)") {
		t.Fatalf("terminal %v", lc)
	}
}

func TestStreamDecoderStatusCode(t *testing.T) {
	d := newStreamDecoder(false, 1<<20, 500, "run-")
	out, err := d.Feed([]byte("data: {\"error\":\"An Error Occurred\"}\n\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	lc := out[len(out)-1].GetLifecycle()
	if canonical.Code(lc.GetError().GetCode()) != canonical.CodeInternal || lc.GetError().GetMessage() != "An Error Occurred" {
		t.Fatalf("terminal %v", lc)
	}
	d = newStreamDecoder(false, 1<<20, 503, "run-")
	out, _ = d.Feed([]byte("event: error\ndata: overloaded\n\n"), nil)
	if lc := out[len(out)-1].GetLifecycle(); canonical.Code(lc.GetError().GetCode()) != canonical.CodeUnavailable || lc.GetError().GetMessage() != "overloaded" {
		t.Fatalf("terminal %v", lc)
	}
}

// FuzzStreamDecoder: any bytes, cut anywhere, give the same events as in
// one piece; they always satisfy the canonical invariants and the decoder
// holds bounded memory.
func FuzzStreamDecoder(f *testing.F) {
	for _, c := range wireCases(f) {
		if !c.object {
			f.Add(c.wire, uint64(len(c.wire)), c.cumulative)
		}
	}
	f.Fuzz(func(t *testing.T, wire []byte, seed uint64, cumulative bool) {
		const maxEvent = 512
		want := decodeChunks(t, [][]byte{wire}, cumulative, maxEvent)
		if err := canonical.Validate(want); err != nil {
			t.Fatal(err)
		}
		for _, ev := range want {
			if _, err := proto.Marshal(ev); err != nil { // it must cross NATS
				t.Fatalf("%v: %v", ev, err)
			}
		}
		got := decodeChunks(t, chunk.Split(wire, seed, 1+int(seed%9)), cumulative, maxEvent)
		if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
			t.Fatal(d)
		}
	})
}
