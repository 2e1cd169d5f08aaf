package inspect

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Directions of a wire's bytes.
const (
	dirIn  = "in"  // toward the daemon: the client's request, the upstream's response
	dirOut = "out" // from the daemon: our response to the client, our request upstream
)

// chunkOverhead is what a chunk costs against max_bytes beyond its bytes,
// so that many tiny writes are bounded too.
const chunkOverhead = 64

// chunk is one write or read on a wire.
type chunk struct {
	at   int64  // unix ns
	dir  string // dirIn or dirOut
	head bool   // a request or status line with headers, not body bytes
	off  int64  // offset of data in its direction's body bytes
	data []byte
}

// wire records one side's bytes, bounded by bytes and time.
type wire struct {
	in       *Inspector
	mu       sync.Mutex
	chunks   []chunk
	bytes    int   // counted against limit
	limit    int   // max_bytes
	until    int64 // unix ns after which nothing is kept
	dropped  int64 // bytes seen but not kept
	tapped   bool  // anything was recorded (or dropped)
	bodyLen  [2]int64
	overTime bool
	done     bool // the exchange's request is over
}

func newWire(in *Inspector, start time.Time) *wire {
	return &wire{in: in, limit: in.cfg.MaxBytes, until: start.Add(in.cfg.MaxDuration).UnixNano()}
}

func dirIndex(dir string) int {
	if dir == dirOut {
		return 1
	}
	return 0
}

// record keeps a copy of p, unless the wire is over its bounds.
func (w *wire) record(dir string, head bool, p []byte) {
	if len(p) == 0 {
		return
	}
	now := w.in.now().UnixNano()
	w.mu.Lock()
	w.tapped = true
	off := w.bodyLen[dirIndex(dir)]
	if !head {
		w.bodyLen[dirIndex(dir)] += int64(len(p))
	}
	switch {
	case now > w.until:
		w.overTime = true
		w.dropped += int64(len(p))
	case w.bytes+len(p)+chunkOverhead > w.limit:
		w.dropped += int64(len(p))
	default:
		w.bytes += len(p) + chunkOverhead
		w.chunks = append(w.chunks, chunk{at: now, dir: dir, head: head, off: off, data: append([]byte(nil), p...)})
	}
	w.mu.Unlock()
	w.in.bump()
}

// finish marks the wire's exchange over.
func (w *wire) finish() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
	w.in.bump()
}

// bodyOffset is the number of body bytes seen in dir so far.
func (w *wire) bodyOffset(dir string) int64 {
	if w == nil {
		return -1
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bodyLen[dirIndex(dir)]
}

// since returns the chunks from index i on, as JSON values relative to
// origin, and the next index.
func (w *wire) since(i int, origin time.Time) ([]chunkJSON, int) {
	if w == nil {
		return nil, i
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []chunkJSON
	for ; i < len(w.chunks); i++ {
		out = append(out, w.chunks[i].json(origin))
	}
	return out, i
}

// truncation says why the wire kept less than it saw ("" when whole).
func (w *wire) truncation(name string) string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dropped == 0 {
		return ""
	}
	why := "max_bytes"
	if w.overTime {
		why = "max_duration"
	}
	return fmt.Sprintf("%s: %d bytes not kept (%s)", name, w.dropped, why)
}

// chunkJSON is a chunk in the API: text when its bytes are UTF-8, else
// base64.
type chunkJSON struct {
	TMs    float64 `json:"t_ms"`
	Dir    string  `json:"dir"`
	Head   bool    `json:"head,omitempty"`
	Offset int64   `json:"offset"`
	Len    int     `json:"len"`
	Text   *string `json:"text,omitempty"`
	Base64 []byte  `json:"base64,omitempty"`
}

func (c chunk) json(origin time.Time) chunkJSON {
	j := chunkJSON{TMs: msSince(origin, c.at), Dir: c.dir, Head: c.head, Offset: c.off, Len: len(c.data)}
	if utf8.Valid(c.data) {
		s := string(c.data)
		j.Text = &s
	} else {
		j.Base64 = c.data
	}
	return j
}

func msSince(origin time.Time, at int64) float64 {
	return float64((at-origin.UnixNano())/1000) / 1000
}

// secretHeaders are never recorded: their values are replaced.
var secretHeaders = map[string]bool{"Authorization": true, "X-Api-Key": true, "Proxy-Authorization": true,
	"Cookie": true, "Set-Cookie": true, "Api-Key": true}

// headText renders a start line and headers, secrets redacted.
func headText(line string, h http.Header) []byte {
	var sb strings.Builder
	sb.WriteString(line)
	sb.WriteString("\r\n")
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			if secretHeaders[http.CanonicalHeaderKey(k)] {
				v = "[redacted]"
			}
			sb.WriteString(k + ": " + v + "\r\n")
		}
	}
	sb.WriteString("\r\n")
	return []byte(sb.String())
}

func requestHead(r *http.Request) []byte {
	return headText(r.Method+" "+requestURI(r.URL)+" "+r.Proto, r.Header)
}

// keyParam is the query parameter a WebSocket client may send its API key
// in (browsers cannot set Authorization on a WebSocket).
const keyParam = "key"

// requestURI is u's request URI with the API key in its query, if any,
// redacted as the secret headers are: an admin reads other keys' captures,
// never their keys.
func requestURI(u *url.URL) string {
	q := u.Query()
	if !q.Has(keyParam) {
		return u.RequestURI()
	}
	q[keyParam] = []string{"[redacted]"}
	c := *u
	c.RawQuery = q.Encode()
	return c.RequestURI()
}

func responseHead(status int, h http.Header) []byte {
	return headText(fmt.Sprintf("HTTP %d %s", status, http.StatusText(status)), h)
}
