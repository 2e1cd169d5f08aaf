package sse

import (
	"bytes"
	stdcmp "cmp"
	"errors"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/chunk"
)

// options are the Parser settings a case or fixture runs with.
type options struct {
	max        int
	comments   bool
	incomplete bool
	borrow     bool
}

func (o options) parser() *Parser {
	return &Parser{MaxEventBytes: o.max, KeepComments: o.comments, DispatchIncompleteAtEnd: o.incomplete, BorrowData: o.borrow}
}

// result is everything a parse yields that must not depend on chunking.
type result struct {
	Events      []Event
	Err         bool
	LastEventID string
	Retry       int
	RetrySet    bool
}

// parse feeds chunks to a new parser, ends it, and checks after each step
// that the parser never holds more than its limit.
func parse(t testing.TB, o options, chunks [][]byte) result {
	t.Helper()
	p := o.parser()
	limit := p.limit()
	var (
		events []Event
		err    error
	)
	// A borrowing parser's events are good until the next call: keep
	// copies (chunk.Feed overwrites each chunk once fed, so anything the
	// parser still held of it would show in later events).
	keep := func(from int) {
		if o.borrow {
			for i := from; i < len(events); i++ {
				events[i].Data = bytes.Clone(events[i].Data)
			}
		}
	}
	err = chunk.Feed(chunks, func(c []byte) (err error) {
		n := len(events)
		events, err = p.Feed(c, events)
		keep(n)
		if n := p.buffered(); err == nil && n > limit {
			t.Fatalf("parser holds %d bytes, limit %d", n, limit)
		}
		return err
	})
	if err == nil {
		n := len(events)
		events, err = p.End(events)
		keep(n)
	}
	if err != nil {
		var le *LimitError
		if !errors.As(err, &le) {
			t.Fatalf("error %v is not a *LimitError", err)
		}
		if got := canonical.CodeOf(err); got != canonical.CodeResourceExhausted {
			t.Fatalf("error code %v, want resource_exhausted", got)
		}
	}
	r := result{Events: events, Err: err != nil, LastEventID: p.LastEventID()}
	r.Retry, r.RetrySet = p.Retry()
	return r
}

// ev and com build expected events.
func ev(data string) Event       { return Event{Data: []byte(data)} }
func com(text string) Event      { return Event{Comment: text, IsComment: true} }
func evID(id, data string) Event { return Event{ID: id, HasID: true, Data: []byte(data)} }

type parserCase struct {
	name   string
	opts   options
	wire   string
	want   []Event
	lastID string
	retry  int // -1: none set
}

var parserCases = []parserCase{
	{name: "LF", wire: "data: a\n\n", want: []Event{ev("a")}, retry: -1},
	{name: "CRLF", wire: "data: a\r\n\r\n", want: []Event{ev("a")}, retry: -1},
	{name: "CR", wire: "data: a\r\r", want: []Event{ev("a")}, retry: -1},
	{name: "mixed line ends", wire: "data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\n\n", want: []Event{ev("a\nb\nc"), ev("d")}, retry: -1},
	{name: "LF CR is two line ends", wire: "data: a\n\rdata: b\n\n", want: []Event{ev("a"), ev("b")}, retry: -1},
	{name: "multi-line data", wire: "data: a\ndata: b\ndata: c\n\n", want: []Event{ev("a\nb\nc")}, retry: -1},
	{name: "empty data line in the middle", wire: "data: a\ndata:\ndata: b\n\n", want: []Event{ev("a\n\nb")}, retry: -1},
	{name: "empty data line at the end", wire: "data: a\ndata:\n\n", want: []Event{ev("a\n")}, retry: -1},
	{name: "several events", wire: "data: 1\n\ndata: 2\n\n\n\ndata: 3\n\n", want: []Event{ev("1"), ev("2"), ev("3")}, retry: -1},
	{name: "data without space", wire: "data:a\n\n", want: []Event{ev("a")}, retry: -1},
	{name: "only one space stripped", wire: "data:  a \n\nevent:  e\ndata:\t b\n\n", want: []Event{ev(" a "), {Event: " e", Data: []byte("\t b")}}, retry: -1},
	{name: "colon in value", wire: "data: a: b:c\n\n", want: []Event{ev("a: b:c")}, retry: -1},
	{name: "field with no colon", wire: "data\n\ndata\ndata\n\n", want: []Event{ev(""), ev("\n")}, retry: -1},
	{name: "empty value dispatched", wire: "data:\n\ndata: \n\n", want: []Event{ev(""), ev("")}, retry: -1},
	{name: "empty data buffer not dispatched", wire: "event: x\n\n\n\nfoo: bar\n\n", want: nil, retry: -1},
	{name: "event type", wire: "event: add\ndata: 1\n\ndata: 2\n\n", want: []Event{{Event: "add", Data: []byte("1")}, ev("2")}, retry: -1},
	{name: "event type repeated", wire: "event: add\ndata: 1\n\nevent: add\ndata: 2\n\nevent: del\nevent: put\ndata: 3\n\n", want: []Event{{Event: "add", Data: []byte("1")}, {Event: "add", Data: []byte("2")}, {Event: "put", Data: []byte("3")}}, retry: -1},
	{name: "unknown fields ignored", wire: "foo: bar\ndata: a\nDATA: b\nData: c\n data: d\n\n", want: []Event{ev("a")}, retry: -1},
	{name: "comments dropped", wire: ": ping\n\n:\ndata: x\n: inside\ndata: y\n\n", want: []Event{ev("x\ny")}, retry: -1},
	{
		name: "comments kept", opts: options{comments: true},
		wire: ": ping\n\n:\n:  two\ndata: x\n: inside\ndata: y\n\n",
		want: []Event{com("ping"), com(""), com(" two"), com("inside"), ev("x\ny")}, retry: -1,
	},
	{name: "BOM", wire: "\xEF\xBB\xBFdata: a\n\n", want: []Event{ev("a")}, retry: -1},
	{name: "BOM only at start", wire: "data: a\n\n\xEF\xBB\xBFdata: b\n\n", want: []Event{ev("a")}, retry: -1},
	{name: "second BOM is content", wire: "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n", want: nil, retry: -1},
	{name: "partial BOM is content", wire: "\xEF\xBBdata: a\n\n", want: nil, retry: -1},
	{name: "partial BOM then line end", wire: "\xEF\ndata: a\n\n", want: []Event{ev("a")}, retry: -1},
	{name: "partial BOM only", opts: options{incomplete: true}, wire: "\xEF\xBB", want: nil, retry: -1},
	{name: "BOM only", wire: "\xEF\xBB\xBF", want: nil, retry: -1},
	{name: "id", wire: "id: 1\ndata: a\n\n", want: []Event{evID("1", "a")}, lastID: "1", retry: -1},
	{name: "id persists", wire: "id: 1\ndata: a\n\ndata: b\n\n", want: []Event{evID("1", "a"), {ID: "1", Data: []byte("b")}}, lastID: "1", retry: -1},
	{name: "empty id resets", wire: "id: 1\ndata: a\n\nid\ndata: b\n\nid:\ndata: c\n\n", want: []Event{evID("1", "a"), evID("", "b"), evID("", "c")}, retry: -1},
	{name: "id with NUL ignored", wire: "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", want: []Event{evID("1", "a"), {ID: "1", Data: []byte("b")}}, lastID: "1", retry: -1},
	{name: "id-only block", wire: "id: 7\n\ndata: b\n\n", want: []Event{{ID: "7", Data: []byte("b")}}, lastID: "7", retry: -1},
	{name: "last id wins", wire: "id: 1\nid: 2\ndata: a\n\n", want: []Event{evID("2", "a")}, lastID: "2", retry: -1},
	{name: "retry", wire: "retry: 3000\ndata: a\n\ndata: b\n\n", want: []Event{{Data: []byte("a"), Retry: 3000}, ev("b")}, retry: 3000},
	{name: "retry-only block", wire: "retry: 10\n\n", want: nil, retry: 10},
	{name: "invalid retries ignored", wire: "retry: 5\n\nretry: 3x\nretry: -1\nretry:\nretry:  7\nretry: 1.5\nretry\ndata: a\n\n", want: []Event{ev("a")}, retry: 5},
	{name: "retry clamped", wire: "retry: 99999999999999999999999\ndata: a\n\n", want: []Event{{Data: []byte("a"), Retry: math.MaxInt32}}, retry: math.MaxInt32},
	{name: "NUL and invalid UTF-8 in data", wire: "data: a\x00b\xff\xfe\n\n", want: []Event{ev("a\x00b\xff\xfe")}, retry: -1},
	{name: "incomplete event discarded", wire: "data: a\n\ndata: b\n", want: []Event{ev("a")}, retry: -1},
	{name: "incomplete line discarded", wire: "data: a\n\nid: 9\ndata: b", want: []Event{ev("a")}, lastID: "9", retry: -1},
	{name: "incomplete event dispatched", opts: options{incomplete: true}, wire: "data: a\n\ndata: b\n", want: []Event{ev("a"), ev("b")}, retry: -1},
	{name: "incomplete line dispatched", opts: options{incomplete: true}, wire: "data: a\n\ndata: b", want: []Event{ev("a"), ev("b")}, retry: -1},
	{name: "incomplete trailing CR", opts: options{incomplete: true}, wire: "data: a\r", want: []Event{ev("a")}, retry: -1},
	{name: "incomplete id-only", opts: options{incomplete: true}, wire: "data: a\n\nid: 5", want: []Event{ev("a")}, lastID: "5", retry: -1},
	{name: "incomplete nothing pending", opts: options{incomplete: true}, wire: "data: a\n\n", want: []Event{ev("a")}, retry: -1},
	{name: "empty stream", wire: "", want: nil, retry: -1},
	{name: "at limit", opts: options{max: 16}, wire: "data: 0123456789\n\ndata: 0123456\n\n", want: []Event{ev("0123456789"), ev("0123456")}, retry: -1},
	{
		name: "triton frames",
		wire: `data: {"model_name":"ensemble","model_version":"1","text_output":"Hello"}` + "\n\n" +
			`data: {"model_name":"ensemble","model_version":"1","text_output":" world"}` + "\n\n",
		want: []Event{
			ev(`{"model_name":"ensemble","model_version":"1","text_output":"Hello"}`),
			ev(`{"model_name":"ensemble","model_version":"1","text_output":" world"}`),
		},
		retry: -1,
	},
	{
		name: "agent protocol frames", opts: options{comments: true},
		wire: "event: metadata\r\nid: 1\r\ndata: {\"run_id\":\"r\"}\r\n\r\n: heartbeat\r\n\r\n" +
			"event: values\r\nid: 2\r\ndata: {\"messages\":\r\ndata: []}\r\n\r\nevent: end\r\ndata: null\r\n\r\n",
		want: []Event{
			{ID: "1", HasID: true, Event: "metadata", Data: []byte(`{"run_id":"r"}`)},
			com("heartbeat"),
			{ID: "2", HasID: true, Event: "values", Data: []byte("{\"messages\":\n[]}")},
			{ID: "2", Event: "end", Data: []byte("null")},
		},
		lastID: "2", retry: -1,
	},
}

func TestParser(t *testing.T) {
	for _, tt := range parserCases {
		t.Run(tt.name, func(t *testing.T) {
			got := parse(t, tt.opts, [][]byte{[]byte(tt.wire)})
			if got.Err {
				t.Fatal("unexpected error")
			}
			if d := cmp.Diff(tt.want, got.Events, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			for i, e := range got.Events {
				if !e.IsComment && e.Data == nil {
					t.Errorf("event %d has nil Data", i)
				}
			}
			if got.LastEventID != tt.lastID {
				t.Errorf("LastEventID %q, want %q", got.LastEventID, tt.lastID)
			}
			if tt.retry < 0 && got.RetrySet || tt.retry >= 0 && (!got.RetrySet || got.Retry != tt.retry) {
				t.Errorf("Retry() = %d, %v; want %d", got.Retry, got.RetrySet, tt.retry)
			}
		})
	}
}

// TestParserChunkBoundaries covers state kept between explicit chunks.
func TestParserChunkBoundaries(t *testing.T) {
	tests := []struct {
		name   string
		opts   options
		chunks []string
		want   []Event
	}{
		{"CRLF split", options{}, []string{"data: a\r", "\n\r", "\n"}, []Event{ev("a")}},
		{"CRLF split by empty chunks", options{}, []string{"data: a\r", "", "", "\ndata: b\r", "", "\n\r\n"}, []Event{ev("a\nb")}},
		{"CR then CR", options{}, []string{"data: a\r", "\r"}, []Event{ev("a")}},
		{"CR at end then data", options{}, []string{"data: a\r", "data: b\n\n"}, []Event{ev("a\nb")}},
		{"field name split", options{}, []string{"da", "ta: a\n\n"}, []Event{ev("a")}},
		{"BOM split", options{}, []string{"\xEF", "\xBB", "\xBFdata: a\n\n"}, []Event{ev("a")}},
		{"BOM split with empty chunks", options{}, []string{"", "\xEF", "", "\xBB\xBF", "data: a\n\n"}, []Event{ev("a")}},
		{"partial BOM split", options{}, []string{"\xEF\xBB", "\n", "data: a\n\n"}, []Event{ev("a")}},
		{"comment split", options{comments: true}, []string{": pi", "ng\r", "\n"}, []Event{com("ping")}},
		{"incomplete split", options{incomplete: true}, []string{"data: a", "b"}, []Event{ev("ab")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var chunks [][]byte
			for _, c := range tt.chunks {
				chunks = append(chunks, []byte(c))
			}
			got := parse(t, tt.opts, chunks)
			if got.Err {
				t.Fatal("unexpected error")
			}
			if d := cmp.Diff(tt.want, got.Events, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

// TestParserDoesNotKeepChunk checks that events do not alias fed chunks.
func TestParserDoesNotKeepChunk(t *testing.T) {
	var p Parser
	chunk := []byte("event: e\nid: i\ndata: a\n\ndata: b")
	out, err := p.Feed(chunk, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range chunk {
		chunk[i] = 'X'
	}
	if out, err = p.Feed([]byte("c\n\n"), out); err != nil {
		t.Fatal(err)
	}
	want := []Event{{ID: "i", HasID: true, Event: "e", Data: []byte("a")}, {ID: "i", Data: []byte("bc")}}
	if d := cmp.Diff(want, out); d != "" {
		t.Error(d)
	}
}

func TestParserLimit(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		chunks []string
		want   []Event // dispatched before the error
		what   string
	}{
		{"line too long", 16, []string{"data: 0123456789a\n\n"}, nil, "line"},
		{"line too long cut", 16, []string{"data: 01234", "56789a"}, nil, "line"},
		{"line too long without line end", 16, []string{"data: 0123456789a"}, nil, "line"},
		{"comment too long", 8, []string{": 0123456789\n"}, nil, "line"},
		{"event too long", 16, []string{"data: 0123456\ndata: 0123456\n\n"}, nil, "event"},
		{"event too long cut", 16, []string{"data: 0123456\ndata: 01", "23456\n\n"}, nil, "event"},
		{"id counts", 16, []string{"id: 0123456789\ndata: 0123\n\n"}, nil, "event"},
		{"events before the error", 16, []string{"data: a\n\ndata: b\n", "\ndata: 0123456789a\n\n"}, []Event{ev("a"), ev("b")}, "line"},
		{"default limit", 0, []string{"data: ", strings.Repeat("x", DefaultMaxEventBytes)}, nil, "line"},
		{"negative means default", -1, []string{"data: ", strings.Repeat("x", DefaultMaxEventBytes)}, nil, "line"},
		{"default limit over events", 0, []string{strings.Repeat("data: "+strings.Repeat("x", 1<<20)+"\n", 4)}, nil, "event"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Parser{MaxEventBytes: tt.max}
			var (
				out []Event
				err error
			)
			for _, c := range tt.chunks {
				if out, err = p.Feed([]byte(c), out); err != nil {
					break
				}
			}
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want a *LimitError", err)
			}
			wantLimit := stdcmp.Or(max(tt.max, 0), DefaultMaxEventBytes)
			if le.Limit != wantLimit || le.What != tt.what || le.Size <= le.Limit {
				t.Errorf("LimitError %+v, want limit %d, what %q, size over the limit", *le, wantLimit, tt.what)
			}
			if canonical.CodeOf(err) != canonical.CodeResourceExhausted {
				t.Errorf("code %v, want resource_exhausted", canonical.CodeOf(err))
			}
			if !strings.Contains(err.Error(), "MaxEventBytes") {
				t.Errorf("message %q does not name MaxEventBytes", err)
			}
			if d := cmp.Diff(tt.want, out, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if p.buffered() > wantLimit {
				t.Errorf("holds %d bytes", p.buffered())
			}
			// Sticky.
			if _, err2 := p.Feed([]byte("data: x\n\n"), nil); err2 != err {
				t.Errorf("Feed after error: %v", err2)
			}
			if got, err2 := p.End(nil); err2 != err || len(got) != 0 {
				t.Errorf("End after error: %v, %v", got, err2)
			}
		})
	}
}

func TestParserAfterEnd(t *testing.T) {
	var p Parser
	if _, err := p.End(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Feed([]byte("data: a\n\n"), nil); canonical.CodeOf(err) != canonical.CodeFailedPrecondition {
		t.Errorf("Feed after End: %v", err)
	}
	if _, err := p.End(nil); canonical.CodeOf(err) != canonical.CodeFailedPrecondition {
		t.Errorf("End after End: %v", err)
	}
}

// TestParserReleasesLargeBuffers checks that one big event does not pin
// its buffers for the rest of the stream.
func TestParserReleasesLargeBuffers(t *testing.T) {
	var p Parser
	big := "data: " + strings.Repeat("x", 2*maxKeptBuffer)
	out, err := p.Feed([]byte(big[:100]), nil)
	if err == nil {
		out, err = p.Feed([]byte(big[100:]+"\n\ndata: y\n\n"), out)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("%d events", len(out))
	}
	if cap(p.line) > maxKeptBuffer || cap(p.data) > maxKeptBuffer {
		t.Errorf("kept line %d, data %d bytes", cap(p.line), cap(p.data))
	}
}

// normalize turns CRLF and CR into LF, as a reader sees line ends.
func normalize(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
}

// randomBytes returns up to n bytes drawn mostly from a small alphabet
// rich in line ends, spaces and colons.
func randomBytes(r *rand.Rand, n int) []byte {
	const alphabet = "ab :\r\n\n\x00\xEF\xBB\xBF"
	b := make([]byte, r.IntN(n+1))
	for i := range b {
		if r.IntN(8) == 0 {
			b[i] = byte(r.IntN(256))
		} else {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
	}
	return b
}

// TestRoundTrip checks that whatever Writer writes, Parser reads back.
func TestRoundTrip(t *testing.T) {
	type written struct {
		id, event string
		data      []byte
		comment   *string
	}
	fixed := []written{
		{data: nil}, {data: []byte("")}, {data: []byte("\n")}, {data: []byte("\n\n")},
		{data: []byte("\r\n")}, {data: []byte("\r")}, {data: []byte("a\rb\r\nc\nd")},
		{data: []byte(" leading")}, {data: []byte(": not a comment")}, {data: []byte("\xEF\xBB\xBFbom")},
		{id: "1", event: "e", data: []byte("x")}, {id: " 2", event: " spaced", data: []byte(" y ")},
		{event: "only-event", data: []byte("z")}, {id: "3:4", data: []byte("w")},
	}
	ping, multi := "ping", "a\nb"
	fixed = append(fixed, written{comment: &ping}, written{comment: &multi})
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		w := written{data: randomBytes(r, 40)}
		if r.IntN(2) == 0 {
			w.id = strings.Map(func(c rune) rune {
				if c == '\r' || c == '\n' || c == 0 {
					return 'x'
				}
				return c
			}, string(randomBytes(r, 8)))
		}
		if r.IntN(2) == 0 {
			w.event = strings.Map(func(c rune) rune {
				if c == '\r' || c == '\n' {
					return 'x'
				}
				return c
			}, string(randomBytes(r, 8)))
		}
		fixed = append(fixed, w)
	}

	rec := httptest.NewRecorder()
	sw, err := NewWriter(rec)
	if err != nil {
		t.Fatal(err)
	}
	var want []Event
	lastID := ""
	for i, w := range fixed {
		switch {
		case w.comment != nil:
			err = sw.Comment(*w.comment)
			for _, line := range strings.Split(*w.comment, "\n") {
				want = append(want, com(line))
			}
		case w.id == "" && w.event == "" && i%2 == 0:
			err = sw.Data(w.data)
			want = append(want, Event{ID: lastID, Data: normalize(w.data)})
		default:
			err = sw.Event(w.id, w.event, w.data)
			if w.id != "" {
				lastID = w.id
			}
			want = append(want, Event{ID: lastID, HasID: w.id != "", Event: w.event, Data: normalize(w.data)})
		}
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	got := parse(t, options{comments: true}, [][]byte{rec.Body.Bytes()})
	if got.Err {
		t.Fatal("unexpected error")
	}
	if d := cmp.Diff(want, got.Events, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}

// fixture is a stream and the options to parse it with.
type fixture struct {
	opts options
	wire []byte
}

// fixtures returns the re-chunking fixtures: every parser case, plus
// streams that hit the limit and one long mixed stream.
func fixtures() []fixture {
	var fs []fixture
	for _, c := range parserCases {
		fs = append(fs, fixture{c.opts, []byte(c.wire)})
	}
	var mixed strings.Builder
	mixed.WriteString("\xEF\xBB\xBF: open\r\nretry: 1500\r\n\r\n")
	for i := range 20 {
		eol := []string{"\n", "\r\n", "\r"}[i%3]
		mixed.WriteString("id: " + strings.Repeat("i", i) + eol)
		mixed.WriteString("event: e" + eol + "data: line one" + eol + "data:line two" + eol)
		mixed.WriteString(": beat" + eol + eol)
	}
	mixed.WriteString("data: tail")
	fs = append(fs,
		fixture{options{comments: true}, []byte(mixed.String())},
		fixture{options{incomplete: true}, []byte(mixed.String())},
		fixture{options{max: 16}, []byte("data: a\n\ndata: 0123456789a\n\ndata: b\n\n")},
		fixture{options{max: 16}, []byte("data: a\r\ndata: 0123456\r\ndata: 0123456\r\n\r\n")},
		fixture{options{max: 16}, []byte("data: a\n\ndata: 0123456789a")},
		fixture{options{max: 4}, []byte("\xEF\xBB\xBF:\r\n\r\n")},
		fixture{options{max: 1}, []byte("\xEF\xBB")},
	)
	return fs
}

// split cuts b into pieces at random points (empty pieces included).
func split(b []byte, r *rand.Rand) [][]byte {
	cuts := []int{0, len(b)}
	for range r.IntN(8) + 1 {
		cuts = append(cuts, r.IntN(len(b)+1))
	}
	slices.Sort(cuts)
	pieces := make([][]byte, 0, len(cuts)-1)
	for i := 1; i < len(cuts); i++ {
		pieces = append(pieces, b[cuts[i-1]:cuts[i]])
	}
	return pieces
}

// TestParserRechunking checks that every 2-way split, the 1-byte split and
// 500 random k-way splits of each fixture parse like the whole.
func TestParserRechunking(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i, f := range fixtures() {
		want := parse(t, f.opts, [][]byte{f.wire})
		check := func(how string, chunks [][]byte) {
			t.Helper()
			o := f.opts
			o.borrow = r.IntN(2) == 0 // borrowing changes nothing the caller sees
			got := parse(t, o, chunks)
			if reflect.DeepEqual(want, got) { // fast path; cmp.Diff to report
				return
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("fixture %d (%q), %s (-whole +split):\n%s", i, f.wire, how, d)
			}
		}
		for cut := range len(f.wire) + 1 {
			check("2-way split", [][]byte{f.wire[:cut], f.wire[cut:]})
		}
		var bytewise [][]byte
		for j := range f.wire {
			bytewise = append(bytewise, f.wire[j:j+1])
		}
		check("1-byte split", bytewise)
		for range 500 {
			check("random split", split(f.wire, r))
		}
	}
}

func FuzzParser(f *testing.F) {
	for i, fx := range fixtures() {
		f.Add(fx.wire, uint64(i))
	}
	f.Fuzz(func(t *testing.T, wire []byte, seed uint64) {
		// The seed picks the options as well as the cuts.
		o := options{
			comments:   seed&1 != 0,
			incomplete: seed&2 != 0,
			max:        []int{0, 4, 16, 64}[seed>>2&3],
		}
		want := parse(t, o, [][]byte{wire})
		o.borrow = seed&16 != 0 // borrowing changes nothing the caller sees
		got := parse(t, o, split(wire, rand.New(rand.NewPCG(seed, seed>>32))))
		if want.Err != got.Err {
			t.Fatalf("error depends on chunking: %v / %v", want.Err, got.Err)
		}
		if reflect.DeepEqual(want, got) { // fast path; cmp.Diff to report
			return
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("events depend on chunking (-whole +split):\n%s", d)
		}
	})
}

// tritonFrame is a typical Triton generate_stream event.
const tritonFrame = `data: {"model_name":"ensemble","model_version":"1","sequence_end":false,"sequence_id":0,"text_output":" the"}` + "\n\n"

func TestParserFeedAllocs(t *testing.T) {
	stream := []byte(strings.Repeat(tritonFrame, 100))
	var p Parser
	out := make([]Event, 0, 128)
	n := testing.AllocsPerRun(20, func() {
		var err error
		if out, err = p.Feed(stream, out[:0]); err != nil || len(out) != 100 {
			t.Fatal(len(out), err)
		}
	})
	if n > 100 {
		t.Errorf("%v allocations for 100 events, want at most 100", n)
	}
}

func BenchmarkParserFeed(b *testing.B) {
	stream := []byte(strings.Repeat(tritonFrame, 1000))
	var chunks [][]byte
	for len(stream) > 0 {
		n := min(4096, len(stream))
		chunks = append(chunks, stream[:n])
		stream = stream[n:]
	}
	var p Parser
	out := make([]Event, 0, 64)
	b.SetBytes(int64(len(tritonFrame)))
	b.ReportAllocs()
	b.ResetTimer()
	// One op is one event: feed chunks round the stream until b.N events.
	for events, c := 0, 0; events < b.N; c = (c + 1) % len(chunks) {
		var err error
		if out, err = p.Feed(chunks[c], out[:0]); err != nil {
			b.Fatal(err)
		}
		events += len(out)
	}
}
