package inspect

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/conformance/profile"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/protocol"
	"github.com/interlingua-dev/interlingua/protocols"
)

//go:embed web
var webFiles embed.FS

// Mount registers the JSON API under /v1/inspect/ on mux (behind the
// daemon's auth).
func (in *Inspector) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/inspect/runs", in.admin(in.serveList))
	mux.HandleFunc("GET /v1/inspect/runs/{id}", in.admin(in.serveRun))
	mux.HandleFunc("GET /v1/inspect/runs/{id}/stream", in.admin(in.serveStream))
	mux.HandleFunc("POST /v1/inspect/runs/{id}/replay", in.admin(in.serveReplay))
	mux.HandleFunc("GET /v1/inspect/protocols", in.admin(in.serveProtocols))
	mux.HandleFunc("GET /v1/inspect/capture", in.admin(in.serveCapture))
	mux.HandleFunc("POST /v1/inspect/capture", in.admin(in.serveArm))
}

// Page serves the page's static files (/inspect, /inspect/...) and hands
// every other request to next. The files carry no data, so they are
// served without a key: a browser's navigation cannot send one, and the
// page sends the key it is given with every API call.
func (in *Inspector) Page(next http.Handler) http.Handler {
	sub, _ := fs.Sub(webFiles, "web")
	files := http.StripPrefix("/inspect/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/inspect" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			http.Redirect(w, r, "/inspect/", http.StatusFound)
		case strings.HasPrefix(r.URL.Path, "/inspect/") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			files.ServeHTTP(w, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// admin refuses callers that may not use the inspector.
func (in *Inspector) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if in.deps.Admin == nil || !in.deps.Admin(r.Context()) {
			refuse(w, r, http.StatusForbidden, canonical.CodePermissionDenied,
				"the inspector is for admin API keys (auth.keys[].admin: true)")
			return
		}
		h(w, r)
	}
}

func refuse(w http.ResponseWriter, r *http.Request, status int, code canonical.Code, msg string) {
	protocol.WriteCanonicalRefusal(w, r, protocol.Refusal{Status: status, Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.MarshalWrite(w, v)
}

// runJSON is a capture's summary.
type runJSON struct {
	ID               string    `json:"id"`
	Thread           string    `json:"thread"`
	Target           string    `json:"target"`
	Frontend         string    `json:"frontend"`
	Backend          string    `json:"backend"`
	BackendType      string    `json:"backend_type"`
	Key              string    `json:"key"`
	Status           string    `json:"status"`
	Code             string    `json:"code,omitempty"`
	Message          string    `json:"message,omitempty"`
	Start            time.Time `json:"start"`
	TTFDMs           *float64  `json:"ttfd_ms,omitempty"`
	DurationMs       float64   `json:"duration_ms"`
	Events           int       `json:"events"`
	ClientRecorded   bool      `json:"client_recorded"`
	UpstreamRecorded bool      `json:"upstream_recorded"`
	Truncated        []string  `json:"truncated"`
}

func (r *Run) summary() runJSON {
	r.mu.Lock()
	s := runJSON{ID: r.id, Thread: r.thread, Target: r.target, Frontend: r.frontend, Backend: r.backend,
		BackendType: r.backendType, Key: r.key, Status: r.status, Code: r.code, Message: r.message,
		Start: r.start, Events: len(r.events) + r.evDropped, ClientRecorded: r.client != nil}
	end := r.end
	if r.ttfd > 0 {
		ms := float64(r.ttfd.Microseconds()) / 1000
		s.TTFDMs = &ms
	}
	if r.canonical != nil {
		why := "max_bytes"
		if r.canonical.overTime {
			why = "max_duration"
		}
		s.Truncated = append(s.Truncated, "events: "+itoa(r.evDropped)+" events not kept ("+why+")")
	}
	r.mu.Unlock()
	if end.IsZero() {
		end = r.in.now()
	}
	s.DurationMs = float64(end.Sub(r.start).Microseconds()) / 1000
	r.upstream.mu.Lock()
	s.UpstreamRecorded = r.upstream.tapped
	r.upstream.mu.Unlock()
	for _, t := range []string{r.client.truncation("client"), r.upstream.truncation("upstream")} {
		if t != "" {
			s.Truncated = append(s.Truncated, t)
		}
	}
	return s
}

func (in *Inspector) serveList(w http.ResponseWriter, _ *http.Request) {
	out := struct {
		Runs []runJSON `json:"runs"`
	}{Runs: []runJSON{}}
	for _, r := range in.list() {
		out.Runs = append(out.Runs, r.summary())
	}
	writeJSON(w, out)
}

// eventJSON is a canonical event in the API.
type eventJSON struct {
	TMs            float64    `json:"t_ms"`
	Seq            uint64     `json:"seq"`
	Kind           string     `json:"kind"`
	Feature        string     `json:"feature,omitempty"`
	Text           string     `json:"text,omitempty"`
	ClientOffset   int64      `json:"client_offset"`
	UpstreamOffset int64      `json:"upstream_offset"`
	Event          json.Value `json:"event"`
}

// noteJSON is a stated degradation (conformance/profile).
type noteJSON struct {
	Features []string `json:"features"`
	Text     string   `json:"text"`
}

// notesJSON are the stated degradations of the run's two protocols: the
// frontend's (what the client's wire could not carry) and the backend's
// (what the upstream's wire could not).
type notesJSON struct {
	Frontend []noteJSON `json:"frontend"`
	Backend  []noteJSON `json:"backend"`
}

// detailJSON is a capture, whole (GET) or the part after a cursor (the
// stream's updates).
type detailJSON struct {
	Run          runJSON     `json:"run"`
	Request      json.Value  `json:"request,omitempty"`
	Degradations *notesJSON  `json:"degradations,omitempty"`
	Client       []chunkJSON `json:"client"`
	Events       []eventJSON `json:"events"`
	Upstream     []chunkJSON `json:"upstream"`
}

// cursor is how much of a capture a stream has sent.
type cursor struct{ client, events, upstream int }

// detail returns what of r lies after c, and the cursor after it.
func (r *Run) detail(c cursor) (detailJSON, cursor) {
	d := detailJSON{Run: r.summary()}
	d.Client, c.client = r.client.since(c.client, r.start)
	d.Upstream, c.upstream = r.upstream.since(c.upstream, r.start)
	r.mu.Lock()
	for ; c.events < len(r.events); c.events++ {
		e := r.events[c.events]
		d.Events = append(d.Events, eventJSON{TMs: msSince(r.start, e.at), Seq: e.seq, Kind: e.kind, Feature: e.feature,
			Text: e.text, ClientOffset: e.clientOff, UpstreamOffset: e.upOff, Event: e.js})
	}
	r.mu.Unlock()
	if d.Client == nil {
		d.Client = []chunkJSON{}
	}
	if d.Upstream == nil {
		d.Upstream = []chunkJSON{}
	}
	if d.Events == nil {
		d.Events = []eventJSON{}
	}
	return d, c
}

// notes returns the stated degradations of the run's frontend and backend
// protocols.
func (r *Run) notes() *notesJSON {
	n := &notesJSON{Frontend: []noteJSON{}, Backend: []noteJSON{}}
	if p := protocols.Get(r.frontend); p != nil && p.Conformance != nil {
		n.Frontend = notesOf(p.Conformance.FrontNotes)
	}
	if p := protocols.Get(r.backendType); p != nil && p.Conformance != nil {
		n.Backend = notesOf(p.Conformance.BackNotes)
	}
	return n
}

func notesOf(ds []profile.Degradation) []noteJSON {
	out := []noteJSON{}
	for _, d := range ds {
		var fs []string
		for _, f := range strings.Split(d.Feature(), ",") {
			fs = append(fs, strings.TrimSpace(f))
		}
		out = append(out, noteJSON{Features: fs, Text: d.Text()})
	}
	return out
}

// lookup returns the capture named by the path, or refuses.
func (in *Inspector) lookup(w http.ResponseWriter, r *http.Request) *Run {
	run := in.get(r.PathValue("id"))
	if run == nil {
		refuse(w, r, http.StatusNotFound, canonical.CodeNotFound, "no captured run "+quote(r.PathValue("id")))
	}
	return run
}

func (in *Inspector) serveRun(w http.ResponseWriter, r *http.Request) {
	run := in.lookup(w, r)
	if run == nil {
		return
	}
	d, _ := run.detail(cursor{})
	d.Request, d.Degradations = run.request, run.notes()
	writeJSON(w, d)
}

func (in *Inspector) serveProtocols(w http.ResponseWriter, _ *http.Request) {
	out := struct {
		Replay []string `json:"replay"`
	}{Replay: replayable()}
	writeJSON(w, out)
}

// armJSON is POST /v1/inspect/capture's body and GET's entries.
type armJSON struct {
	Target string    `json:"target"`
	For    string    `json:"for,omitempty"`
	Until  time.Time `json:"until,omitzero"`
}

func (in *Inspector) serveCapture(w http.ResponseWriter, _ *http.Request) {
	out := struct {
		Configured []string  `json:"configured"`
		Armed      []armJSON `json:"armed"`
	}{Configured: append([]string{}, in.cfg.Targets...), Armed: []armJSON{}}
	for g, until := range in.armedList() {
		out.Armed = append(out.Armed, armJSON{Target: g, Until: until})
	}
	writeJSON(w, out)
}

// maxArmBody bounds POST /v1/inspect/capture's body.
const maxArmBody = 4 << 10

func (in *Inspector) serveArm(w http.ResponseWriter, r *http.Request) {
	var a armJSON
	if err := json.UnmarshalRead(http.MaxBytesReader(w, r.Body, maxArmBody), &a); err != nil {
		refuse(w, r, http.StatusBadRequest, canonical.CodeInvalidArgument, "capture: the body is not {\"target\": ..., \"for\": \"10m\"}: "+err.Error())
		return
	}
	d, err := time.ParseDuration(a.For)
	if _, gerr := pathMatch(a.Target); a.Target == "" || gerr != nil || err != nil {
		refuse(w, r, http.StatusBadRequest, canonical.CodeInvalidArgument, "capture: target must be a name or glob and for a duration (\"10m\"; \"0s\" disarms)")
		return
	}
	writeJSON(w, armJSON{Target: a.Target, Until: in.arm(a.Target, d)})
}
