package openai

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

// decodeChunks runs the stream decoder over chunks (each overwritten once
// fed: chunk.Feed), then End.
func decodeChunks(chunks [][]byte) ([]*canonical.Event, error) {
	d := newStreamDecoder(1<<20, 1<<20, "m", "run-")
	var out []*canonical.Event
	err := chunk.Feed(chunks, func(c []byte) (err error) {
		if !d.Ended() { // what comes after the end is not read
			out, err = d.Feed(c, out)
		}
		return err
	})
	if err != nil {
		return d.Fail(out, err), err
	}
	if d.Ended() {
		return out, nil
	}
	if out, err = d.End(out); err != nil {
		return d.Fail(out, err), err
	}
	return out, nil
}

// render is the events as a golden holds them: one JSON line each, keys
// sorted.
func render(t *testing.T, evs []*canonical.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, ev := range evs {
		line, err := protojson.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(v, json.Deterministic(true))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(out)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// goldenFile compares got with testdata/<name>, rewriting it under -update.
func goldenFile(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
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
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Fatalf("%s differs (run with -update to accept):\n%s", file, d)
	}
}

// TestStreamGoldens decodes each testdata/stream/<case>.sse (the variants
// of reference section 8, written as their servers send them) whole and
// checks the canonical events against <case>.events: the Validator passes
// and the run ends exactly once.
func TestStreamGoldens(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "stream", "*.sse"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no stream cases: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".sse")
		t.Run(name, func(t *testing.T) {
			wire, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := decodeChunks([][]byte{wire})
			v := canonical.NewValidator()
			for _, ev := range evs {
				if err := v.Check(ev); err != nil {
					t.Fatalf("validator: %v", err)
				}
			}
			if _, ok := canonical.TerminalOf(evs[len(evs)-1]); !ok {
				t.Fatalf("no terminal event last")
			}
			goldenFile(t, filepath.Join("stream", name+".events"), render(t, evs))
		})
	}
}

// TestStreamRechunking: every case decodes to the same events however its
// bytes are cut (property of STYLE section 10).
func TestStreamRechunking(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "stream", "*.sse"))
	for _, f := range files {
		wire, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, werr := decodeChunks([][]byte{wire})
		for seed := uint64(0); seed < 200; seed++ {
			got, gerr := decodeChunks(chunk.Random(wire, seed))
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s seed %d: error depends on chunking: %v / %v", f, seed, werr, gerr)
			}
			if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
				t.Fatalf("%s seed %d:\n%s", f, seed, d)
			}
		}
	}
}

// FuzzStreamDecoder: any input decodes to the same events however it is
// cut, ends in exactly one terminal event, and never panics.
func FuzzStreamDecoder(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "stream", "*.sse"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b, uint64(7))
		}
	}
	f.Fuzz(func(t *testing.T, wire []byte, seed uint64) {
		want, werr := decodeChunks([][]byte{wire})
		got, gerr := decodeChunks(chunk.Random(wire, seed))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("error depends on chunking: %v / %v", werr, gerr)
		}
		if !sameEvents(want, got) { // proto.Equal first: cmp.Diff was 90% of each execution
			t.Fatal(cmp.Diff(want, got, protocmp.Transform()))
		}
		terminals := 0
		for _, ev := range got {
			if _, ok := canonical.TerminalOf(ev); ok {
				terminals++
			}
		}
		if terminals != 1 {
			t.Fatalf("%d terminal events", terminals)
		}
	})
}

// sameEvents reports whether a and b are the same events.
func sameEvents(a, b []*canonical.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestStreamChunkReused: the decoder reads every chunk into one reused
// inChunk, so nothing of a chunk may show again in a later one that lacks
// the member (a null, an absent delta, fewer choices).
func TestStreamChunkReused(t *testing.T) {
	chunks := []string{
		`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"a","reasoning_content":"r"},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":null},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[]}`,
		`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}]}`,
	}
	var wire [][]byte
	for _, c := range chunks {
		wire = append(wire, []byte("data: "+c+"\n\n"))
	}
	wire = append(wire, []byte("data: [DONE]\n\n"))
	evs, err := decodeChunks(wire)
	if err != nil {
		t.Fatal(err)
	}
	var deltas []string
	for _, ev := range evs {
		if d := ev.GetBlockDelta(); d != nil {
			deltas = append(deltas, d.GetText())
		}
	}
	if got := strings.Join(deltas, "|"); got != "r|a|b" {
		t.Fatalf("deltas %q, want r|a|b (reasoning r, then text a and b)", got)
	}
	if r, _ := canonical.TerminalOf(evs[len(evs)-1]); r != canonical.StatusCompleted {
		t.Fatalf("terminal %v, want completed", evs[len(evs)-1])
	}
}

// BenchmarkDecodeDelta is the backend's per-delta cost: one SSE
// chat.completion.chunk carrying a text delta, as vLLM writes it.
func BenchmarkDecodeDelta(b *testing.B) {
	d := newStreamDecoder(1<<20, 1<<20, "m", "run-")
	first := []byte(`data: {"id":"chatcmpl-9f2c0a7d1e4b4b8e","object":"chat.completion.chunk","created":1710000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	chunk := []byte(`data: {"id":"chatcmpl-9f2c0a7d1e4b4b8e","object":"chat.completion.chunk","created":1710000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	out, _ := d.Feed(first, nil)
	b.ReportAllocs()
	for b.Loop() {
		out, _ = d.Feed(chunk, out[:0])
	}
}
