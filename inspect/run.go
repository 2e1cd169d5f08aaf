package inspect

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Run is one captured run. Its columns are the client wire (shared with
// the other runs of the same HTTP exchange; nil for a run no client
// request of this instance started), the canonical events as the frontend
// received them, and the upstream wire.
type Run struct {
	in                        *Inspector
	id, thread                string
	target, frontend, backend string
	backendType               string
	key                       string // the API key's name; "" with auth off
	start                     time.Time
	until                     int64 // unix ns: events after it are not kept
	client, upstream          *wire
	request                   json.Value // the canonical request, protojson

	mu        sync.Mutex
	events    []eventRec
	evBytes   int
	evDropped int
	blocks    map[uint32]canonical.BlockType // open blocks' types, by index
	status    string
	code      string
	message   string
	ttfd      time.Duration // 0: no delta yet
	end       time.Time
	canonical *canonicalTrunc
}

// canonicalTrunc records why events were not kept.
type canonicalTrunc struct{ overTime bool }

// eventRec is one canonical event as the frontend received it.
type eventRec struct {
	at        int64
	seq       uint64
	kind      string
	feature   string
	text      string
	js        json.Value
	clientOff int64
	upOff     int64
}

// protoJSON renders events and requests for the API.
var protoJSON = protojson.MarshalOptions{UseProtoNames: true}

// event records ev, as the frontend takes it.
func (r *Run) event(ev *canonical.Event) {
	now := r.in.now()
	clientOff, upOff := r.client.bodyOffset(dirOut), r.upstream.bodyOffset(dirIn)
	kind, text := kindOf(ev)
	r.mu.Lock()
	feature := r.feature(ev)
	if _, ok := ev.GetKind().(*canonical.KindBlockDelta); ok && r.ttfd == 0 {
		r.ttfd = max(now.Sub(r.start), time.Nanosecond)
	}
	if st, ok := canonical.TerminalOf(ev); ok {
		r.status, r.end = statusName(st), now
		if e := ev.GetLifecycle().GetError(); e != nil {
			r.code, r.message = canonical.Code(e.GetCode()).String(), e.GetMessage()
		}
	}
	js, err := protoJSON.Marshal(ev)
	switch {
	case err != nil:
		r.evDropped++
	case now.UnixNano() > r.until:
		r.evDropped++
		r.canonical = &canonicalTrunc{overTime: true}
	case r.evBytes+len(js)+chunkOverhead > r.in.cfg.MaxBytes:
		r.evDropped++
		if r.canonical == nil {
			r.canonical = &canonicalTrunc{}
		}
	default:
		r.evBytes += len(js) + chunkOverhead
		r.events = append(r.events, eventRec{at: now.UnixNano(), seq: ev.GetSeq(), kind: kind, feature: feature,
			text: text, js: js, clientOff: clientOff, upOff: upOff})
	}
	r.mu.Unlock()
	r.in.bump()
}

// closed marks a run its frontend closed before the terminal event.
func (r *Run) closed() {
	r.mu.Lock()
	if r.status == "running" {
		r.status, r.end = "abandoned", r.in.now()
	}
	r.mu.Unlock()
	r.in.bump()
}

// feature is the conformance feature (the name a profile's stated
// degradations use) that ev carries. Called with r.mu held.
func (r *Run) feature(ev *canonical.Event) string {
	switch k := ev.GetKind().(type) {
	case *canonical.KindBlockStart:
		if r.blocks == nil {
			r.blocks = map[uint32]canonical.BlockType{}
		}
		r.blocks[k.BlockStart.GetIndex()] = k.BlockStart.GetType()
		return blockFeature(k.BlockStart.GetType())
	case *canonical.KindBlockDelta:
		return blockFeature(r.blocks[k.BlockDelta.GetIndex()])
	case *canonical.KindBlockFinish:
		return blockFeature(r.blocks[k.BlockFinish.GetIndex()])
	case *canonical.KindToolStarted, *canonical.KindToolOutput, *canonical.KindToolFinished, *canonical.KindToolFailed:
		return "tool-activity"
	case *canonical.KindInputRequested:
		return "interrupt"
	case *canonical.KindError:
		return "error-nonterminal"
	case *canonical.KindLifecycle:
		switch k.Lifecycle.GetStatus() {
		case canonical.StatusFailed:
			return "error-mid"
		case canonical.StatusCancelled:
			return "cancel"
		case canonical.StatusInterrupted:
			return "interrupt"
		}
	}
	return ""
}

func blockFeature(t canonical.BlockType) string {
	switch t {
	case canonical.BlockText:
		return "text"
	case canonical.BlockReasoning:
		return "reasoning"
	case canonical.BlockToolCall:
		return "tool-call"
	case canonical.BlockData, canonical.BlockRef:
		return "multimodal"
	}
	return ""
}

// kindOf names ev's kind and the text it carries, for the page.
func kindOf(ev *canonical.Event) (kind, text string) {
	switch k := ev.GetKind().(type) {
	case *canonical.KindLifecycle:
		return "lifecycle", statusName(k.Lifecycle.GetStatus())
	case *canonical.KindBlockDelta:
		return "block_delta", k.BlockDelta.GetText()
	case *canonical.KindBlockStart:
		return "block_start", strings.ToLower(strings.TrimPrefix(k.BlockStart.GetType().String(), "BLOCK_TYPE_"))
	case nil:
		return "", ""
	}
	// The oneof wrapper's type name: *v1.Event_ToolStarted -> tool_started.
	name := fmt.Sprintf("%T", ev.GetKind()) // *interlinguav1.Event_ToolStarted
	name = strings.TrimPrefix(name[strings.LastIndexByte(name, '.')+1:], "Event_")
	var sb strings.Builder
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			if i > 0 {
				sb.WriteByte('_')
			}
			c += 'a' - 'A'
		}
		sb.WriteRune(c)
	}
	return sb.String(), ""
}

func statusName(s canonical.RunStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "RUN_STATUS_"))
}

// upstreamRecorder records a run's upstream exchanges (wiretap.Recorder).
type upstreamRecorder struct{ w *wire }

func (u upstreamRecorder) Request(r *http.Request) {
	u.w.record(dirOut, true, headText(r.Method+" "+redactURL(r)+" "+r.Proto, r.Header))
}
func (u upstreamRecorder) Response(resp *http.Response) {
	u.w.record(dirIn, true, headText(resp.Proto+" "+resp.Status, resp.Header))
}
func (u upstreamRecorder) Sent(p []byte)     { u.w.record(dirOut, false, p) }
func (u upstreamRecorder) Received(p []byte) { u.w.record(dirIn, false, p) }

// redactURL is the request's URL without user information or query (an
// upstream key may travel in either).
func redactURL(r *http.Request) string {
	u := *r.URL
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "[redacted]"
	}
	return u.String()
}
