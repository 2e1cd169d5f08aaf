package responses

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/chunk"
)

// decodeChunks runs the stream decoder over chunks (each overwritten once
// fed: chunk.Feed), then End.
func decodeChunks(chunks [][]byte) ([]*canonical.Event, error) {
	d := newStreamDecoder(1<<20, 1<<20, "run-")
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

// render is the events as a golden holds them: one protojson line each.
func render(t *testing.T, evs []*canonical.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, ev := range evs {
		line, err := protojson.MarshalOptions{}.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := compactJSON(&compact, line); err != nil {
			t.Fatal(err)
		}
		b.Write(compact.Bytes())
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// compactJSON removes protojson's unstable spacing.
func compactJSON(dst *bytes.Buffer, src []byte) error {
	var v any
	if err := jsonUnmarshalAny(src, &v); err != nil {
		return err
	}
	out, err := jsonMarshalSorted(v)
	if err != nil {
		return err
	}
	dst.Write(out)
	return nil
}

func checkGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Fatalf("%s differs (-want +got):\n%s", file, d)
	}
}

// TestStreamDecoder decodes each recorded stream (testdata/stream/*.sse:
// the reference's literal streams and the variants real servers send) to
// the canonical events in its .events golden; every result passes the
// Validator.
func TestStreamDecoder(t *testing.T) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	if len(files) == 0 {
		t.Fatal("no streams")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			evs, _ := decodeChunks([][]byte{data})
			if err := canonical.Validate(evs); err != nil {
				t.Fatalf("invalid events: %v", err)
			}
			checkGolden(t, strings.TrimSuffix(file, ".sse")+".events", render(t, evs))
		})
	}
}

// TestStreamDecoderRechunk is the property that any cutting of a stream
// into chunks yields the same events: each recorded stream, cut at 200
// seeds' points (single bytes, CRLF pairs and runes split included).
func TestStreamDecoderRechunk(t *testing.T) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want, werr := decodeChunks([][]byte{data})
		for seed := range uint64(200) {
			got, gerr := decodeChunks(chunk.Random(data, seed))
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s seed %d: error depends on chunking: %v / %v", file, seed, werr, gerr)
			}
			if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
				t.Fatalf("%s seed %d: events depend on chunking:\n%s", file, seed, d)
			}
		}
	}
}

// FuzzStreamDecoder: any input decodes without panicking to events the
// Validator accepts, ending in one terminal event, the same for any
// chunking.
func FuzzStreamDecoder(f *testing.F) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint64(len(data)))
	}
	f.Add([]byte("data: {\"type\":\"response.output_text.delta\",\"delta\":\"\\ud800x\"}\n\ndata: [DONE]\n\n"), uint64(3))
	f.Add([]byte("data: {\"type\":\"error\",\"error\":null}\n\n"), uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		want, werr := decodeChunks([][]byte{data})
		if err := canonical.Validate(want); err != nil {
			t.Fatalf("invalid events: %v", err)
		}
		if len(want) == 0 {
			t.Fatal("no terminal event")
		}
		if _, ok := canonical.TerminalOf(want[len(want)-1]); !ok {
			t.Fatal("the last event is not terminal")
		}
		got, gerr := decodeChunks(chunk.Random(data, seed))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("error depends on chunking: %v / %v", werr, gerr)
		}
		if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
			t.Fatal(d)
		}
	})
}

// BenchmarkDecodeDelta is the backend's per-delta cost: one
// response.output_text.delta event as OpenAI writes it.
func BenchmarkDecodeDelta(b *testing.B) {
	d := newStreamDecoder(1<<20, 1<<30, "run-")
	const item = "msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654"
	start := []byte(`event: response.output_item.added` + "\n" + `data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"` + item + `","type":"message","status":"in_progress","content":[],"role":"assistant"}}` + "\n\n" +
		`event: response.content_part.added` + "\n" + `data: {"type":"response.content_part.added","sequence_number":3,"item_id":"` + item + `","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}` + "\n\n")
	out, err := d.Feed(start, nil)
	if err != nil {
		b.Fatal(err)
	}
	var frame []byte
	seq := 4
	b.ReportAllocs()
	for b.Loop() {
		frame = append(frame[:0], "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":"...)
		frame = strconv.AppendInt(frame, int64(seq), 10)
		frame = append(frame, `,"item_id":"`+item+`","output_index":0,"content_index":0,"delta":" token","logprobs":[],"obfuscation":"Xy3kQ"}`+"\n\n"...)
		seq++
		if out, err = d.Feed(frame, out[:0]); err != nil || len(out) == 0 {
			b.Fatal(err, len(out))
		}
		if d.text.Len() > 1<<20 {
			d.text.Reset()
		}
	}
}
