package native

import (
	"cmp"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Config configures the frontend.
type Config struct {
	Runner canonical.Runner
	// Observer serves GET /v1/threads/{thread}/events; nil leaves it out.
	Observer canonical.Observer
	Logger   *slog.Logger
	// MaxRequestBytes bounds the request body. Default 4 MiB.
	MaxRequestBytes int64
}

// Frontend is the native NDJSON frontend.
type Frontend struct {
	cfg Config
}

// NewFrontend returns the frontend.
func NewFrontend(cfg Config) *Frontend {
	cfg.MaxRequestBytes = cmp.Or(cfg.MaxRequestBytes, 4<<20)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Frontend{cfg: cfg}
}

// Mount registers the frontend's routes.
func (f *Frontend) Mount(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/runs", f.serveRun)
	mux.HandleFunc("/v1/runs", methodNotAllowed(http.MethodPost))
	if f.cfg.Observer != nil {
		mux.HandleFunc("GET /v1/threads/{thread}/events", f.serveObserve)
		mux.HandleFunc("/v1/threads/{thread}/events", methodNotAllowed(http.MethodGet))
	}
}

// methodNotAllowed answers a method a path does not take: 405 with Allow,
// in the native error form (ServeMux's own 405 is plain text).
func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		e := canonical.Errorf(canonical.CodeUnimplemented, "method %s is not allowed on %s: use %s", r.Method, r.URL.Path, allow)
		writeStatusError(w, http.StatusMethodNotAllowed, e)
	}
}

// serveObserve streams a thread's events after ?since= (or Last-Event-ID),
// then live ones, until the client leaves.
func (f *Frontend) serveObserve(w http.ResponseWriter, r *http.Request) {
	sinceText := r.URL.Query().Get("since")
	if sinceText == "" {
		sinceText = r.Header.Get("Last-Event-ID")
	}
	var since uint64
	if sinceText != "" {
		n, err := strconv.ParseUint(sinceText, 10, 64)
		if err != nil {
			writeError(w, canonical.Errorf(canonical.CodeInvalidArgument, "since: %q is not a sequence number", sinceText))
			return
		}
		since = n
	}
	stream, err := f.cfg.Observer.Observe(r.Context(), r.PathValue("thread"), since)
	if err != nil {
		writeError(w, canonical.AsError(err))
		return
	}
	defer stream.Close()
	f.writeStream(w, stream, r.PathValue("thread"))
}

var marshal = protojson.MarshalOptions{}

func (f *Frontend) serveRun(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, f.cfg.MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, canonical.Errorf(canonical.CodeResourceExhausted, "request body exceeds %d bytes", mbe.Limit))
			return
		}
		writeError(w, canonical.Errorf(canonical.CodeInvalidArgument, "reading request body: %v", err))
		return
	}
	req := &canonical.Request{}
	if err := protojson.Unmarshal(body, req); err != nil {
		// protobuf-go puts a space or, at random per build, a no-break space
		// after "proto:"; send the plain space so the message is stable.
		msg := strings.ReplaceAll(err.Error(), "\u00a0", " ")
		writeError(w, canonical.Errorf(canonical.CodeInvalidArgument, "request: %s", msg))
		return
	}
	if req.GetTarget() == "" {
		writeError(w, canonical.Errorf(canonical.CodeInvalidArgument, "request: target is required"))
		return
	}
	stream, err := f.cfg.Runner.Run(r.Context(), req)
	if err != nil {
		writeError(w, canonical.AsError(err))
		return
	}
	defer stream.Close()
	f.writeStream(w, stream, req.GetThreadId())
}

// writeStream writes events as NDJSON lines until the stream ends or the
// client leaves. A line is flushed once the run has no more events at hand
// (canonical.Buffered): a burst is one write, and no event waits for a
// later one. A stream that fails after the headers (a replay that reaches
// events the log has let go of, a log that cannot be read) ends with an
// error event of thread naming why, so that its client tells it from a
// stream the server closed.
func (f *Frontend) writeStream(w http.ResponseWriter, stream canonical.Stream, thread string) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The headers go now: an observed thread may have no event for a
	// long while, and its client should know it is connected.
	_ = rc.Flush()
	ready, _ := stream.(canonical.Buffered)
	var line []byte
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return // after the terminal event; the server flushes what is written
		}
		failed := err != nil
		if failed {
			ev = &canonical.Event{ThreadId: thread, Kind: &canonical.KindError{Error: canonical.AsError(err).Proto()}}
		}
		line, err = marshal.MarshalAppend(line[:0], ev)
		if err != nil {
			f.cfg.Logger.Error("encoding event", "run", ev.GetRunId(), "err", err)
			return
		}
		line = append(line, '\n')
		// A client that stops reading is cut off by the server's
		// write_timeout (bridge/writedeadline.go), one mechanism for
		// every path: the write fails and the deferred Close cancels the run.
		if _, err := w.Write(line); err != nil || failed {
			_ = rc.Flush()
			return
		}
		if ready != nil && ready.Buffered() > 0 {
			continue
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func writeError(w http.ResponseWriter, e *canonical.Error) {
	writeStatusError(w, httpStatus(e.Code), e)
}

// writeStatusError writes e with the HTTP status given.
func writeStatusError(w http.ResponseWriter, status int, e *canonical.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w, errorJSON) // writes the value and a newline, as encoding/json's Encoder did
	_ = json.MarshalEncode(enc, &errorBody{Code: e.Code.String(), Message: e.Message})
}

// errorBody is the native error form; its members in the order
// encoding/json wrote the map it replaces (sorted).
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// errorJSON writes an error body as encoding/json wrote it: <, > and &
// escaped, U+2028 and U+2029 escaped, and a message carrying an upstream's
// invalid UTF-8 written with U+FFFD rather than not at all (the character,
// not encoding/json's escape of it: the same string to a reader).
var errorJSON = json.JoinOptions(json.EscapeForHTML(true), json.EscapeForJS(true), json.AllowInvalidUTF8(true))
