package sse

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/interlingua-dev/interlingua/canonical"
)

// recorder is a ResponseWriter that records each Write and counts flushes.
type recorder struct {
	header   http.Header
	writes   [][]byte
	flushes  int
	writeErr error
	short    bool // report one byte less than written
	flushErr error
}

func (r *recorder) Header() http.Header {
	if r.header == nil {
		r.header = http.Header{}
	}
	return r.header
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.writeErr != nil {
		return 0, r.writeErr
	}
	r.writes = append(r.writes, bytes.Clone(p))
	if r.short {
		return len(p) - 1, nil
	}
	return len(p), nil
}

func (r *recorder) WriteHeader(int) {}

func (r *recorder) FlushError() error {
	r.flushes++
	return r.flushErr
}

// noFlush is a ResponseWriter that cannot flush.
type noFlush struct{ h http.Header }

func (n noFlush) Header() http.Header       { return n.h }
func (noFlush) Write(p []byte) (int, error) { return len(p), nil }
func (noFlush) WriteHeader(int)             {}

// wrapper hides its ResponseWriter's methods behind Unwrap, as middleware does.
type wrapper struct{ inner http.ResponseWriter }

func (w wrapper) Header() http.Header         { return w.inner.Header() }
func (w wrapper) Write(p []byte) (int, error) { return w.inner.Write(p) }
func (w wrapper) WriteHeader(code int)        { w.inner.WriteHeader(code) }
func (w wrapper) Unwrap() http.ResponseWriter { return w.inner }

func TestWriterGolden(t *testing.T) {
	tests := []struct {
		name string
		op   func(*Writer) error
		want string
	}{
		{"data json", func(w *Writer) error { return w.Data([]byte(`{"text_output":"hi"}`)) }, "data: {\"text_output\":\"hi\"}\n\n"},
		{"data empty", func(w *Writer) error { return w.Data(nil) }, "data: \n\n"},
		{"data leading spaces", func(w *Writer) error { return w.Data([]byte("  x ")) }, "data:   x \n\n"},
		{"data colon", func(w *Writer) error { return w.Data([]byte("a: b")) }, "data: a: b\n\n"},
		{"data LF", func(w *Writer) error { return w.Data([]byte("a\nb")) }, "data: a\ndata: b\n\n"},
		{"data CRLF CR trailing LF", func(w *Writer) error { return w.Data([]byte("a\r\nb\rc\n")) }, "data: a\ndata: b\ndata: c\ndata: \n\n"},
		{"data only CRLF", func(w *Writer) error { return w.Data([]byte("\r\n")) }, "data: \ndata: \n\n"},
		{"data CR CR", func(w *Writer) error { return w.Data([]byte("\r\r")) }, "data: \ndata: \ndata: \n\n"},
		{"event all fields", func(w *Writer) error { return w.Event("7", "delta", []byte("x")) }, "id: 7\nevent: delta\ndata: x\n\n"},
		{"event name only", func(w *Writer) error { return w.Event("", "end", nil) }, "event: end\ndata: \n\n"},
		{"event id only", func(w *Writer) error { return w.Event("7", "", []byte("x")) }, "id: 7\ndata: x\n\n"},
		{"event plain", func(w *Writer) error { return w.Event("", "", []byte("x")) }, "data: x\n\n"},
		{"event multi-line", func(w *Writer) error { return w.Event("1", "m", []byte("a\n\nb")) }, "id: 1\nevent: m\ndata: a\ndata: \ndata: b\n\n"},
		{"event spaced values", func(w *Writer) error { return w.Event(" 7", " e", []byte(" d")) }, "id:  7\nevent:  e\ndata:  d\n\n"},
		{"comment", func(w *Writer) error { return w.Comment("ping") }, ": ping\n\n"},
		{"comment empty", func(w *Writer) error { return w.Comment("") }, ": \n\n"},
		{"comment multi-line", func(w *Writer) error { return w.Comment("a\r\nb") }, ": a\n: b\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			w, err := NewWriter(rec)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.op(w); err != nil {
				t.Fatal(err)
			}
			if len(rec.writes) != 1 || rec.flushes != 1 {
				t.Fatalf("got %d writes and %d flushes, want one of each", len(rec.writes), rec.flushes)
			}
			if got := string(rec.writes[0]); got != tt.want {
				t.Errorf("wrote %q, want %q", got, tt.want)
			}
			// The same bytes again: the reused buffer holds nothing over.
			if err := tt.op(w); err != nil {
				t.Fatal(err)
			}
			if got := string(rec.writes[1]); got != tt.want {
				t.Errorf("second write %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriterSequence(t *testing.T) {
	rec := httptest.NewRecorder()
	w, err := NewWriter(rec)
	if err != nil {
		t.Fatal(err)
	}
	SetHeaders(rec.Header())
	for _, op := range []func() error{
		func() error { return w.Comment("hello") },
		func() error { return w.Event("1", "delta", []byte("a\nb")) },
		func() error { return w.Data([]byte("c")) },
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	want := ": hello\n\nid: 1\nevent: delta\ndata: a\ndata: b\n\ndata: c\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body %q, want %q", got, want)
	}
	if !rec.Flushed {
		t.Error("not flushed")
	}
}

func TestSetHeaders(t *testing.T) {
	h := http.Header{"Content-Type": {"text/plain"}}
	SetHeaders(h)
	want := http.Header{
		"Content-Type":      {"text/event-stream"},
		"Cache-Control":     {"no-cache"},
		"X-Accel-Buffering": {"no"},
	}
	if d := cmp.Diff(want, h); d != "" {
		t.Error(d)
	}
}

func TestNewWriter(t *testing.T) {
	tests := []struct {
		name string
		w    http.ResponseWriter
		ok   bool
	}{
		{"flusher", httptest.NewRecorder(), true},
		{"FlushError", &recorder{}, true},
		{"cannot flush", noFlush{http.Header{}}, false},
		{"unwraps to flusher", wrapper{wrapper{httptest.NewRecorder()}}, true},
		{"unwraps to no flusher", wrapper{noFlush{http.Header{}}}, false},
		{"unwraps to nil", wrapper{nil}, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewWriter(tt.w)
			if tt.ok != (err == nil) || (w != nil) != tt.ok {
				t.Fatalf("NewWriter = %v, %v; want ok=%v", w, err, tt.ok)
			}
			if err != nil && canonical.CodeOf(err) != canonical.CodeInternal {
				t.Errorf("code %v, want internal", canonical.CodeOf(err))
			}
		})
	}
}

func TestNewWriterWritesNothing(t *testing.T) {
	rec := httptest.NewRecorder()
	if _, err := NewWriter(rec); err != nil {
		t.Fatal(err)
	}
	if rec.Flushed || rec.Body.Len() > 0 {
		t.Error("NewWriter wrote or flushed")
	}
}

func TestWriterThroughUnwrap(t *testing.T) {
	rec := httptest.NewRecorder()
	w, err := NewWriter(wrapper{rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Data([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if !rec.Flushed {
		t.Error("flush did not reach the unwrapped writer")
	}
}

func TestWriterRejectsBadFields(t *testing.T) {
	tests := []struct {
		name      string
		id, event string
	}{
		{"id LF", "1\n2", ""},
		{"id CR", "1\r", ""},
		{"id NUL", "1\x002", ""},
		{"event LF", "", "a\nb"},
		{"event CR", "", "a\r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			w, err := NewWriter(rec)
			if err != nil {
				t.Fatal(err)
			}
			err = w.Event(tt.id, tt.event, []byte("x"))
			if canonical.CodeOf(err) != canonical.CodeInvalidArgument {
				t.Fatalf("err = %v, want invalid_argument", err)
			}
			if len(rec.writes) != 0 || rec.flushes != 0 {
				t.Error("wrote after rejecting")
			}
			// Not sticky: the stream is intact.
			if err := w.Data([]byte("ok")); err != nil {
				t.Errorf("after rejection: %v", err)
			}
		})
	}
}

func TestWriterErrorsAreSticky(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		rec  *recorder
		want error
	}{
		{"write", &recorder{writeErr: boom}, boom},
		{"short write", &recorder{short: true}, io.ErrShortWrite},
		{"flush", &recorder{flushErr: boom}, boom},
	}
	ops := []func(*Writer) error{
		func(w *Writer) error { return w.Data([]byte("x")) },
		func(w *Writer) error { return w.Data([]byte("x\ny")) },
		func(w *Writer) error { return w.Event("1", "e", []byte("x")) },
		func(w *Writer) error { return w.Comment("c") },
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewWriter(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			first := ops[0](w)
			if !errors.Is(first, tt.want) {
				t.Fatalf("err = %v, want %v", first, tt.want)
			}
			calls := len(tt.rec.writes) + tt.rec.flushes
			for _, op := range ops {
				if err := op(w); err != first {
					t.Errorf("later call returned %v, want the first error %v", err, first)
				}
			}
			if len(tt.rec.writes)+tt.rec.flushes != calls {
				t.Error("wrote or flushed after an error")
			}
		})
	}
}

// Queued events are not written until an event written without queueing,
// Flush or BatchBytes; then they go out in one Write and one flush, the
// same bytes as written one by one.
func TestWriterQueue(t *testing.T) {
	one := &recorder{}
	w1, _ := NewWriter(one)
	_ = w1.Data([]byte("a"))
	_ = w1.Event("2", "e", []byte("b\nc"))
	_ = w1.Data([]byte("d"))
	_ = w1.Comment("x")
	want := string(bytes.Join(one.writes, nil))

	tests := []struct {
		name string
		ops  func(w *Writer) error
	}{
		{"ended by Data", func(w *Writer) error {
			_ = w.QueueData([]byte("a"))
			_ = w.QueueEvent("2", "e", []byte("b\nc"))
			if err := w.Data([]byte("d")); err != nil {
				return err
			}
			return w.Comment("x")
		}},
		{"ended by Flush", func(w *Writer) error {
			_ = w.QueueData([]byte("a"))
			_ = w.QueueEvent("2", "e", []byte("b\nc"))
			_ = w.QueueData([]byte("d"))
			if err := w.Flush(); err != nil {
				return err
			}
			return w.Comment("x")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			w, _ := NewWriter(rec)
			if err := tt.ops(w); err != nil {
				t.Fatal(err)
			}
			if got := string(bytes.Join(rec.writes, nil)); got != want {
				t.Fatalf("wrote %q, want %q", got, want)
			}
			if len(rec.writes) != 2 || rec.flushes != 2 {
				t.Fatalf("%d writes, %d flushes; want the three events in one, then the comment", len(rec.writes), rec.flushes)
			}
		})
	}

	t.Run("nothing before flush", func(t *testing.T) {
		rec := &recorder{}
		w, _ := NewWriter(rec)
		_ = w.QueueData([]byte("a"))
		if len(rec.writes) != 0 || rec.flushes != 0 || w.Queued() != len("data: a\n\n") {
			t.Fatalf("queued event written: %q, %d flushes, %d queued", rec.writes, rec.flushes, w.Queued())
		}
		if err := w.Flush(); err != nil || w.Queued() != 0 || rec.flushes != 1 {
			t.Fatalf("Flush: %v, %d queued, %d flushes", err, w.Queued(), rec.flushes)
		}
		if err := w.Flush(); err != nil || rec.flushes != 1 || len(rec.writes) != 1 {
			t.Fatalf("Flush with nothing queued wrote or flushed: %v", err)
		}
	})

	t.Run("batch bound", func(t *testing.T) {
		rec := &recorder{}
		w, _ := NewWriter(rec)
		data := bytes.Repeat([]byte("x"), 1000)
		n := 0
		for len(rec.writes) == 0 {
			if err := w.QueueData(data); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if size := len(rec.writes[0]); size < BatchBytes || size >= BatchBytes+len(data)+len("data: \n\n") || n != size/(len(data)+8) {
			t.Fatalf("first write of %d bytes after %d events; want the queue sent once it reaches %d bytes", size, n, BatchBytes)
		}
		if w.Queued() != 0 || rec.flushes != 1 {
			t.Fatalf("%d bytes left queued, %d flushes", w.Queued(), rec.flushes)
		}
	})

	t.Run("bad id leaves the queue", func(t *testing.T) {
		rec := &recorder{}
		w, _ := NewWriter(rec)
		_ = w.QueueData([]byte("a"))
		if err := w.QueueEvent("1\n", "", nil); canonical.CodeOf(err) != canonical.CodeInvalidArgument {
			t.Fatalf("bad id: %v", err)
		}
		_ = w.Flush()
		if got := string(bytes.Join(rec.writes, nil)); got != "data: a\n\n" {
			t.Fatalf("wrote %q", got)
		}
	})
}

func TestWriterQueueErrorsAreSticky(t *testing.T) {
	boom := errors.New("boom")
	rec := &recorder{writeErr: boom}
	w, _ := NewWriter(rec)
	if err := w.QueueData([]byte("a")); err != nil {
		t.Fatalf("queueing wrote: %v", err)
	}
	first := w.Flush()
	if !errors.Is(first, boom) {
		t.Fatalf("Flush: %v", first)
	}
	for _, op := range []func() error{
		func() error { return w.QueueData([]byte("x")) },
		func() error { return w.QueueEvent("1", "e", []byte("x")) },
		w.Flush,
		func() error { return w.Data([]byte("x")) },
	} {
		if err := op(); err != first {
			t.Errorf("later call returned %v, want %v", err, first)
		}
	}
}

func TestWriterDropsLargeBuffer(t *testing.T) {
	w, err := NewWriter(&recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Data(bytes.Repeat([]byte("x"), 2*maxKeptBuffer)); err != nil {
		t.Fatal(err)
	}
	if cap(w.buf) > maxKeptBuffer {
		t.Errorf("kept a %d-byte buffer", cap(w.buf))
	}
	if err := w.Data([]byte(strings.Repeat("y", 100))); err != nil {
		t.Fatal(err)
	}
	if cap(w.buf) == 0 {
		t.Error("did not keep a small buffer")
	}
}

// discard is a ResponseWriter that drops what it is given and can flush.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header       { return d.h }
func (*discard) Write(p []byte) (int, error) { return len(p), nil }
func (*discard) WriteHeader(int)             {}
func (*discard) Flush()                      {}

func TestWriterDataAllocs(t *testing.T) {
	w, err := NewWriter(&discard{})
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"text_output":"hi"}`)
	multi := []byte("a\nb\r\nc")
	if n := testing.AllocsPerRun(100, func() {
		_ = w.Data(payload)
		_ = w.Event("42", "delta", multi)
		_ = w.Comment("ping")
		_ = w.QueueData(payload)
		_ = w.QueueEvent("43", "delta", payload)
		_ = w.Flush()
	}); n != 0 {
		t.Errorf("%v allocations per run, want 0", n)
	}
}

func BenchmarkWriterData(b *testing.B) {
	w, err := NewWriter(&discard{})
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"text_output":"hi"}`) // 20 bytes
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Data(payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriterEvent(b *testing.B) {
	w, err := NewWriter(&discard{})
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"text_output":"hi"}`)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Event("1234", "values", payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriterQueueData is a burst's per-event cost: queued, with one
// Write and flush per 64 events.
// BenchmarkWriterQueueSeqEvent: an agent-protocol delta frame, the size
// of those an agent frontend queues for each token.
func BenchmarkWriterQueueSeqEvent(b *testing.B) {
	w, err := NewWriter(&discard{})
	if err != nil {
		b.Fatal(err)
	}
	frame := []byte(`{"type":"event","event_id":"1234","seq":1234,"method":"messages","params":{"namespace":[],"timestamp":1710000000000,"node":"model","data":{"event":"content-block-delta","index":0,"delta":{"type":"text-delta","text":"tok "}}}}`)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.QueueSeqEvent(1234, "messages", frame); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWriterQueueData(b *testing.B) {
	w, err := NewWriter(&discard{})
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"text_output":"hi"}`)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := w.QueueData(payload); err != nil {
			b.Fatal(err)
		}
		if i++; i%64 == 0 {
			_ = w.Flush()
		}
	}
}

// QueueSeqEvent writes what QueueEvent writes with the seq in decimal as
// the id, refuses the same event names, and allocates nothing once the
// writer's buffer has grown.
func TestWriterQueueSeqEvent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"", "values", "messages/partial", "e\nvil", "cr\r"}
	for range 2_000 {
		seq := rng.Uint64() >> rng.UintN(64)
		name := names[rng.IntN(len(names))]
		data := []byte(strings.Repeat("x\ny", rng.IntN(4)))
		byString, bySeq := &recorder{}, &recorder{}
		ws, _ := NewWriter(byString)
		wq, _ := NewWriter(bySeq)
		errS := ws.QueueEvent(strconv.FormatUint(seq, 10), name, data)
		errQ := wq.QueueSeqEvent(seq, name, data)
		if (errS == nil) != (errQ == nil) || errS != nil && errS.Error() != errQ.Error() {
			t.Fatalf("seq %d event %q: QueueEvent err %v, QueueSeqEvent err %v", seq, name, errS, errQ)
		}
		_, _ = ws.Flush(), wq.Flush()
		if got, want := string(bytes.Join(bySeq.writes, nil)), string(bytes.Join(byString.writes, nil)); got != want {
			t.Fatalf("seq %d event %q: QueueSeqEvent wrote %q, QueueEvent %q", seq, name, got, want)
		}
	}
	w, _ := NewWriter(&discard{})
	payload := []byte(`["values",{"n":1}]`)
	if n := testing.AllocsPerRun(100, func() {
		_ = w.QueueSeqEvent(1<<40, "values", payload)
		_ = w.Flush()
	}); n != 0 {
		t.Fatalf("QueueSeqEvent allocates %v times per event", n)
	}
}

// TestIndexLineEnd: indexLineEnd finds the first CR or LF as a pass over
// every byte does, for strings and byte slices of every mix of the two.
func TestIndexLineEnd(t *testing.T) {
	naive := func(s []byte) int {
		for i, c := range s {
			if c == '\n' || c == '\r' {
				return i
			}
		}
		return -1
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		s := make([]byte, rng.IntN(80))
		for i := range s {
			s[i] = "ab\r\n\x00é"[rng.IntN(7)]
		}
		if got, want := indexLineEnd(s), naive(s); got != want {
			t.Fatalf("indexLineEnd(%q) = %d, want %d", s, got, want)
		}
		if got, want := indexLineEnd(string(s)), naive(s); got != want {
			t.Fatalf("indexLineEnd(string %q) = %d, want %d", s, got, want)
		}
	}
}
