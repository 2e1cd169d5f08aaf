package anthropic

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/chunk"
)

// decodeChunks runs the backend's decoder over chunks, as stream.Recv
// does (each overwritten once fed: chunk.Feed): a Feed error or End's
// error fails the run.
func decodeChunks(chunks [][]byte) []*canonical.Event {
	d := newStreamDecoder(1<<16, 1<<16, "m", "run-")
	out := d.b.Lifecycle(nil, canonical.StatusRunning)
	err := chunk.Feed(chunks, func(c []byte) (err error) {
		out, err = d.Feed(c, out)
		return err
	})
	if err != nil {
		return d.Fail(out, err)
	}
	if out, err = d.End(out); err != nil {
		out = d.Fail(out, err)
	}
	return out
}

// render is one line per event: kind, index, payload and extensions.
func render(evs []*canonical.Event) string {
	var sb strings.Builder
	for _, ev := range evs {
		switch k := ev.GetKind().(type) {
		case *canonical.KindLifecycle:
			fmt.Fprintf(&sb, "lifecycle %s", k.Lifecycle.GetStatus())
			if e := k.Lifecycle.GetError(); e != nil {
				fmt.Fprintf(&sb, " %s %q", canonical.Code(e.GetCode()), e.GetMessage())
			}
		case *canonical.KindMessageStart:
			fmt.Fprintf(&sb, "message_start %s %s %v", k.MessageStart.GetMessageId(), k.MessageStart.GetRole(), (&structpb.Struct{Fields: k.MessageStart.GetMetadata()}).AsMap())
			if u := k.MessageStart.GetUsage(); u != nil {
				fmt.Fprintf(&sb, " in=%d out=%d cache_read=%d cache_creation=%d", u.GetInputTokens(), u.GetOutputTokens(), u.GetCacheReadTokens(), u.GetCacheCreationTokens())
			}
		case *canonical.KindBlockStart:
			b := k.BlockStart
			fmt.Fprintf(&sb, "block_start %d %s id=%q name=%q", b.GetIndex(), b.GetType(), b.GetId(), b.GetName())
		case *canonical.KindBlockDelta:
			fmt.Fprintf(&sb, "delta %d %q", k.BlockDelta.GetIndex(), k.BlockDelta.GetText())
		case *canonical.KindBlockFinish:
			fmt.Fprintf(&sb, "block_finish %d", k.BlockFinish.GetIndex())
		case *canonical.KindMessageFinish:
			u := k.MessageFinish.GetUsage()
			fmt.Fprintf(&sb, "message_finish %s in=%d out=%d total=%d cache_read=%d cache_creation=%d", k.MessageFinish.GetFinishReason(),
				u.GetInputTokens(), u.GetOutputTokens(), u.GetTotalTokens(), u.GetCacheReadTokens(), u.GetCacheCreationTokens())
		default:
			fmt.Fprintf(&sb, "%T", k)
		}
		if ext := ev.GetExtensions(); len(ext) > 0 {
			keys := make([]string, 0, len(ext))
			for k := range ext {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&sb, " %s=%q", k, ext[k].GetStringValue())
			}
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

func goldenFile(t *testing.T, file, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Fatalf("%s differs:\n%s", file, d)
	}
}

// TestStreamDecoder: each upstream stream of testdata/stream decodes to
// its .events golden, and the events keep the canonical model's rules.
func TestStreamDecoder(t *testing.T) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			wire, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			evs := decodeChunks([][]byte{wire})
			if err := canonical.Validate(evs); err != nil {
				t.Fatalf("events break the model: %v\n%s", err, render(evs))
			}
			goldenFile(t, strings.TrimSuffix(f, ".sse")+".events", render(evs))
		})
	}
}

// TestStreamDecoderRechunking: any cut of a fixture, with LF, CRLF or CR
// line ends, decodes to the same events as the whole.
func TestStreamDecoderRechunking(t *testing.T) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	for _, f := range files {
		wire, _ := os.ReadFile(f)
		want := decodeChunks([][]byte{wire})
		for _, eol := range []string{"\n", "\r\n", "\r"} {
			w := []byte(strings.ReplaceAll(string(wire), "\n", eol))
			for seed := range uint64(50) {
				got := decodeChunks(chunk.Random(w, seed))
				if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
					t.Fatalf("%s eol %q seed %d:\n%s", f, eol, seed, d)
				}
			}
		}
	}
}

// FuzzStreamDecoder: any bytes, cut anywhere, give the same events as
// whole, never a panic, and one terminal event that keeps the model's
// rules.
func FuzzStreamDecoder(f *testing.F) {
	files, _ := filepath.Glob("testdata/stream/*.sse")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b, uint64(1))
	}
	f.Add([]byte("data: {\"type\":\"content_block_delta\",\"index\":0}\n\n"), uint64(7))
	f.Fuzz(func(t *testing.T, wire []byte, seed uint64) {
		want := decodeChunks([][]byte{wire})
		got := decodeChunks(chunk.Random(wire, seed))
		if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
			t.Fatalf("events depend on chunking:\n%s", d)
		}
		if err := canonical.Validate(got); err != nil {
			t.Fatalf("events break the model: %v\n%s", err, render(got))
		}
	})
}

// BenchmarkDecodeDelta is the backend's per-delta cost: one
// content_block_delta event carrying text, as the Messages API writes it.
func BenchmarkDecodeDelta(b *testing.B) {
	d := newStreamDecoder(1<<20, 1<<20, "m", "run-")
	start := []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"first\"}}\n\n")
	out, err := d.Feed(start, nil)
	if err != nil {
		b.Fatal(err)
	}
	frame := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" token\"}}\n\n")
	b.ReportAllocs()
	for b.Loop() {
		if out, err = d.Feed(frame, out[:0]); err != nil || len(out) != 1 {
			b.Fatal(err, len(out))
		}
	}
}

// TestStreamEventReused: the decoder reads every event into one reused
// streamEvent whose index points into the decoder, so a later event must
// not see an earlier one's index or delta: one without an index (absent
// or null) fails the run, and a message_delta without a delta sets no
// stop reason.
func TestStreamEventReused(t *testing.T) {
	head := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n"
	for name, next := range map[string]string{
		"absent": `{"type":"content_block_delta","delta":{"type":"text_delta","text":"b"}}`,
		"null":   `{"type":"content_block_delta","index":null,"delta":{"type":"text_delta","text":"b"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			evs := decodeChunks([][]byte{[]byte(head + "event: content_block_delta\ndata: " + next + "\n\n")})
			end := evs[len(evs)-1].GetLifecycle()
			if end.GetStatus() != canonical.StatusFailed || !strings.Contains(end.GetError().GetMessage(), "content_block_delta without a valid index") {
				t.Fatalf("end %v, want failed: content_block_delta without a valid index", end)
			}
		})
	}
	t.Run("delta without text", func(t *testing.T) {
		evs := decodeChunks([][]byte{[]byte(head +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":2}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":3}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")})
		want := `lifecycle RUN_STATUS_RUNNING
message_start msg_1 assistant map[model:m provider:anthropic] in=1 out=1 cache_read=0 cache_creation=0
block_start 0 BLOCK_TYPE_TEXT id="" name=""
delta 0 "a"
block_finish 0
message_finish FINISH_REASON_LENGTH in=1 out=3 total=4 cache_read=0 cache_creation=0 anthropic.stop_reason="max_tokens"
lifecycle RUN_STATUS_COMPLETED
`
		if got := render(evs); got != want {
			t.Fatalf("got\n%s\nwant\n%s", got, want)
		}
	})
}
