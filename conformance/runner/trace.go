package runner

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/canonical"
)

// maxTraceChunk bounds the bytes of one wire chunk a trace shows.
const maxTraceChunk = 2048

// maxTraceLines bounds one case's trace.
const maxTraceLines = 20000

// recorder collects one case's trace: wire bytes on the client side and
// the upstream side, and canonical events, with times relative to the
// case's start. It is safe for concurrent use.
type recorder struct {
	side    string // "client" or "upstream"
	current func() *trace
}

// trace is one case's trace.
type trace struct {
	start time.Time
	mu    sync.Mutex
	lines []string
	cut   int
}

func newTrace() *trace { return &trace{start: time.Now()} }

func (t *trace) add(format string, args ...any) {
	if t == nil {
		return
	}
	line := fmt.Sprintf("%+10.3fms ", float64(time.Since(t.start).Microseconds())/1000) + fmt.Sprintf(format, args...)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) >= maxTraceLines {
		t.cut++
		return
	}
	t.lines = append(t.lines, line)
}

// String renders the trace.
func (t *trace) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.Join(t.lines, "\n")
	if t.cut > 0 {
		s += fmt.Sprintf("\n… %d more lines not shown", t.cut)
	}
	return s
}

// wire records n bytes crossing a relay, shown as text: dir ">" toward
// the server, "<" toward the client.
func (r *recorder) wire(conn int64, dir string, n int, text string) {
	if r == nil {
		return
	}
	t := r.current()
	if t == nil {
		return
	}
	arrow := "→"
	if dir == "<" {
		arrow = "←"
	}
	t.add("%-8s conn %d %s %d bytes\n%s", r.side, conn, arrow, n, indent(text))
}

// event records a canonical event seen at where ("client" or "upstream").
func (t *trace) event(where string, ev *canonical.Event) {
	if t == nil {
		return
	}
	js, _ := protojson.MarshalOptions{}.Marshal(ev)
	if len(js) > maxTraceChunk {
		js = append(js[:maxTraceChunk:maxTraceChunk], "…"...)
	}
	t.add("%-8s event %s", where, js)
}

// printable shows bytes as text, escaping what is not printable UTF-8, at
// most maxTraceChunk of them.
func printable(b []byte) string {
	more := 0
	if len(b) > maxTraceChunk {
		more = len(b) - maxTraceChunk
		b = b[:maxTraceChunk]
	}
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == '\n':
			sb.WriteString("\\n\n")
		case r == '\r':
			sb.WriteString("\\r")
		case r == '\t':
			sb.WriteString("\\t")
		case r == utf8.RuneError && n <= 1, r < 0x20, r == 0x7f:
			fmt.Fprintf(&sb, "\\x%02x", b[0])
			n = 1
		default:
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	if more > 0 {
		fmt.Fprintf(&sb, "… (%d more bytes)", more)
	}
	return sb.String()
}

func indent(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return "              │ " + strings.ReplaceAll(s, "\n", "\n              │ ")
}
