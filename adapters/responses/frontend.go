package responses

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
	"github.com/interlingua-dev/interlingua/internal/sse"
)

// FrontendConfig configures the Responses frontend. Zero values mean the
// documented defaults; the options come from frontends.responses in the
// daemon's config.
type FrontendConfig struct {
	// MaxInputBytes bounds a request's body. Default 16 MiB.
	MaxInputBytes int64 `yaml:"max_input_bytes"`
	// MaxOutputBytes bounds the text and arguments one response holds.
	// Default 16 MiB.
	MaxOutputBytes int `yaml:"max_output_bytes"`
	// MaxStoredBytes bounds a stored response with its conversation; a
	// conversation that outgrows it can no longer be continued (the
	// response is answered, and stored without it). Default 32 MiB.
	MaxStoredBytes int `yaml:"max_stored_bytes"`
	// NoDone leaves out the data: [DONE] line after a stream's terminal
	// event (OpenAI sends none; Open Responses requires it). Default false.
	NoDone bool `yaml:"no_done"`
	// StoreTimeout bounds each thread-store operation. Default 10s.
	StoreTimeout time.Duration `yaml:"store_timeout"`
	// KeepAlive is how long a stream may be silent (a backend thinking)
	// before ": keepalive" is written, so clients and proxies with idle
	// timeouts keep it. Default 15s.
	KeepAlive time.Duration `yaml:"keepalive"`
	// ReplayWait is how long GET ?stream=true waits for the first event of
	// a finished response from the replay log before it renders the
	// stored response instead (its events have left the log). Default 3s.
	ReplayWait time.Duration `yaml:"replay_wait"`
	// SettleWait is how long a settler reads the replay log for the end of
	// a stored response left unfinished by an instance that stopped
	// (settle.go). Default 30s.
	SettleWait time.Duration `yaml:"settle_wait"`
	// MaxWebSockets bounds the WebSockets open at once (WebSocket mode,
	// websocket.go); one more is refused 429. Default 1024.
	MaxWebSockets int `yaml:"max_websockets"`

	// Runner starts the runs; required.
	Runner canonical.Runner `yaml:"-"`
	// Store keeps stored responses (the bridge's thread store); nil: none
	// is kept, every response is answered with store false.
	Store canonical.ThreadStore `yaml:"-"`
	// CheckThread refuses another API key's response (the bridge's
	// tenancy); nil: only the record's owner is compared.
	CheckThread func(ctx context.Context, thread string) error `yaml:"-"`
	// CancelThread cancels a thread's runs on whichever instance runs
	// them: a background response cancelled on an instance other than
	// the one that started it.
	CancelThread func(thread string) `yaml:"-"`
	// Observer reads a response's run from the bridge's replay log, for
	// GET ?stream=true; nil: refused.
	Observer canonical.Observer `yaml:"-"`
	// Logger receives the frontend's logs; discarded when nil.
	Logger *slog.Logger `yaml:"-"`
}

// Frontend serves POST /v1/responses, GET and DELETE /v1/responses/{id},
// and refuses what it does not support in OpenAI's error form (doc.go).
type Frontend struct {
	cfg   FrontendConfig
	log   *slog.Logger
	store *store // nil: no thread store
	bg    backgroundRuns
	// settling ends the responses left unfinished by a stopped instance.
	settling settlers
	sockets  sockets
}

// NewFrontend returns the frontend.
func NewFrontend(cfg FrontendConfig) *Frontend {
	if cfg.MaxInputBytes <= 0 {
		cfg.MaxInputBytes = 16 << 20
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = 16 << 20
	}
	if cfg.MaxStoredBytes <= 0 {
		cfg.MaxStoredBytes = 32 << 20
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 10 * time.Second
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.ReplayWait <= 0 {
		cfg.ReplayWait = 3 * time.Second
	}
	if cfg.SettleWait <= 0 {
		cfg.SettleWait = 30 * time.Second
	}
	if cfg.MaxWebSockets <= 0 {
		cfg.MaxWebSockets = 1024
	}
	f := &Frontend{cfg: cfg, log: cfg.Logger}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Store != nil {
		f.store = &store{ts: cfg.Store, check: cfg.CheckThread, max: cfg.MaxStoredBytes}
	}
	return f
}

// Mount registers the frontend on mux: /v1/responses and everything under
// it (unknown paths answer OpenAI's 404).
func (f *Frontend) Mount(mux *http.ServeMux) {
	mux.Handle("/v1/responses", f)
	mux.Handle("/v1/responses/", f)
}

// ServeHTTP routes a request.
func (f *Frontend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Every answer has an x-request-id, as OpenAI's API's: the SDKs read it
	// into a response's and an error's request id.
	w.Header().Set("X-Request-Id", canonical.NewID("req_"))
	rest, _ := strings.CutPrefix(r.URL.Path, "/v1/responses")
	rest = strings.TrimPrefix(rest, "/")
	id, sub, _ := strings.Cut(rest, "/")
	switch {
	case rest == "" && r.Method == http.MethodPost:
		f.create(w, r)
	case rest == "" && r.Method == http.MethodGet && websocket.IsWebSocketUpgrade(r):
		f.serveWebSocket(w, r)
	case id != "" && sub == "" && r.Method == http.MethodGet:
		f.retrieve(w, r, id)
	case id != "" && sub == "" && r.Method == http.MethodDelete:
		f.remove(w, r, id)
	case id != "" && sub == "cancel" && r.Method == http.MethodPost:
		f.cancel(w, r, id)
	case id != "" && sub == "input_items" && r.Method == http.MethodGet:
		f.inputItems(w, r, id)
	case rest == "" || (id != "" && (sub == "" || sub == "cancel" || sub == "input_items")):
		(&apiError{status: http.StatusMethodNotAllowed, msg: fmt.Sprintf("Method %s is not allowed on %s.", r.Method, r.URL.Path)}).write(w)
	default:
		(&apiError{status: http.StatusNotFound, msg: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)}).write(w)
	}
}

// notFound is OpenAI's answer for an unknown (or another key's) response.
func notFound(id string) *apiError {
	return &apiError{status: http.StatusNotFound, param: "response_id", msg: fmt.Sprintf("Response with id '%s' not found.", id)}
}

// storeCtx bounds a store operation, which outlives the client's request.
func (f *Frontend) storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), f.cfg.StoreTimeout)
}

// load reads a stored response for a GET, DELETE or cancel.
func (f *Frontend) load(ctx context.Context, id string) (*record, uint64, *apiError) {
	if f.store == nil {
		return nil, 0, notFound(id)
	}
	ctx, cancel := f.storeCtx(ctx)
	defer cancel()
	rec, rev, err := f.store.load(ctx, id)
	switch {
	case err == nil:
		f.settleLater(ctx, rec)
		return rec, rev, nil
	case err.Code == canonical.CodeNotFound:
		return nil, 0, notFound(id)
	}
	f.log.Warn("stored response unreadable", "thread", id, "code", err.Code.String(), "err", err)
	return nil, 0, fromCanonical(err)
}

// retrieve answers GET /v1/responses/{id}.
func (f *Frontend) retrieve(w http.ResponseWriter, r *http.Request, id string) {
	rec, _, e := f.load(r.Context(), id)
	if e != nil {
		e.write(w)
		return
	}
	q := r.URL.Query()
	if q.Get("stream") == "true" {
		after := int64(-1)
		if s := q.Get("starting_after"); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 {
				invalid("starting_after", fmt.Sprintf("Invalid 'starting_after': expected a non-negative integer, got '%s'.", s)).write(w)
				return
			}
			after = n
		}
		f.replay(w, r, rec, after)
		return
	}
	writeJSON(w, http.StatusOK, &rec.Response)
}

// remove answers DELETE /v1/responses/{id}.
func (f *Frontend) remove(w http.ResponseWriter, r *http.Request, id string) {
	if _, _, e := f.load(r.Context(), id); e != nil {
		e.write(w)
		return
	}
	ctx, cancel := f.storeCtx(r.Context())
	defer cancel()
	if err := f.store.remove(ctx, id); err != nil {
		fromCanonical(err).write(w)
		return
	}
	writeJSON(w, http.StatusOK, &deleted{ID: id, Object: "response", Deleted: true})
}

// inputItems answers GET /v1/responses/{id}/input_items: the response's
// input items, newest first unless order=asc (no paging: limit and after
// are not read; has_more is false).
func (f *Frontend) inputItems(w http.ResponseWriter, r *http.Request, id string) {
	rec, _, e := f.load(r.Context(), id)
	if e != nil {
		e.write(w)
		return
	}
	items := make([]item, len(rec.Input))
	copy(items, rec.Input)
	if r.URL.Query().Get("order") != "asc" {
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	list := inputItemList{Object: "list", Data: items}
	if len(items) > 0 {
		list.FirstID, list.LastID = &items[0].ID, &items[len(items)-1].ID
	}
	writeJSON(w, http.StatusOK, &list)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v, json.Deterministic(true)) // metadata in key order
	if err != nil {
		(&apiError{status: http.StatusInternalServerError, msg: "the response cannot be written"}).write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// readBody reads the request body up to MaxInputBytes.
func (f *Frontend) readBody(r *http.Request) ([]byte, *apiError) {
	limit := f.cfg.MaxInputBytes
	tooLarge := &apiError{status: http.StatusRequestEntityTooLarge,
		msg: fmt.Sprintf("The request body exceeds the maximum size of %d bytes (max_input_bytes).", limit)}
	if r.ContentLength > limit {
		return nil, tooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, invalid("", "Reading the request body: "+err.Error())
	}
	if int64(len(body)) > limit {
		return nil, tooLarge
	}
	return body, nil
}

// create answers POST /v1/responses.
func (f *Frontend) create(w http.ResponseWriter, r *http.Request) {
	body, e := f.readBody(r)
	if e != nil {
		e.write(w)
		return
	}
	c, e := decodeCreate(body)
	if e == nil {
		e = c.validate()
	}
	background := e == nil && c.Background != nil && *c.Background
	if background && (f.store == nil || (c.Store != nil && !*c.Store)) {
		e = &apiError{status: http.StatusBadRequest, param: "store", code: "unsupported_parameter",
			msg: "Unsupported parameter: 'background' with 'store': false: a background response is polled from the stored response."}
	}
	if e != nil {
		e.write(w)
		return
	}
	if _, ok := canonical.VisibleTarget(f.cfg.Runner, canonical.PrincipalFrom(r.Context()), c.Model); !ok {
		modelNotFound(c.Model).write(w)
		return
	}
	p, e := f.prepare(r.Context(), c, nil)
	if e != nil {
		e.write(w)
		return
	}
	if background {
		f.runBackground(w, r, c, p)
		return
	}
	f.run(w, r, c, p)
}

// prepared is a create request ready to run.
type prepared struct {
	req *canonical.Request
	rec *record // nil: not stored
	rev uint64
	r   *response
	// conv is the response's conversation (its context and input, and
	// its output once recorded), stored or not: a WebSocket keeps the
	// last one for the next response to continue (wsSession).
	conv *record
}

// prepare resolves previous_response_id (from local, the response a
// WebSocket answered last, when it names that one; else from the store),
// builds the run's request and, for a stored response, claims its thread
// for the caller and writes the in-progress record.
func (f *Frontend) prepare(ctx context.Context, c *createRequest, local *record) (*prepared, *apiError) {
	input, e := c.inputItems()
	if e != nil {
		return nil, e
	}
	if input, e = f.resolveReferences(ctx, input); e != nil {
		return nil, e
	}
	var history []item
	switch {
	case c.PreviousResponseID != nil && local != nil && local.Response.ID == *c.PreviousResponseID:
		history = local.conversation()
	case c.PreviousResponseID != nil:
		prev, _, e := f.load(ctx, *c.PreviousResponseID)
		if e != nil {
			if e.status != http.StatusNotFound {
				return nil, e
			}
			return nil, &apiError{status: http.StatusBadRequest, param: "previous_response_id", code: "previous_response_not_found",
				msg: fmt.Sprintf("Previous response with id '%s' not found.", *c.PreviousResponseID)}
		}
		if prev.Response.Status == "in_progress" || prev.Response.Status == "queued" {
			return nil, invalid("previous_response_id", fmt.Sprintf("Previous response with id '%s' is still %s.", *c.PreviousResponseID, prev.Response.Status))
		}
		history = prev.conversation()
	}
	id := "resp_" + canonical.NewID("")
	for i := range input {
		if input[i].ID == "" {
			input[i].ID = itemID(inputPrefix(input[i].Type), id, true, i)
		}
	}
	store := f.store != nil && (c.Store == nil || *c.Store)
	p := &prepared{req: c.canonicalRequest(append(history[:len(history):len(history)], input...)), r: newResponse(c, id, time.Now(), store)}
	p.conv = &record{Owner: owner(ctx), Response: *p.r, Input: input, Context: history}
	p.conv.Response.Output = []item{}
	if !store {
		return p, nil
	}
	p.req.ThreadId = id
	p.rec = p.conv
	sctx, cancel := f.storeCtx(ctx)
	defer cancel()
	if f.cfg.CheckThread != nil {
		if err := f.cfg.CheckThread(sctx, id); err != nil {
			return nil, fromCanonical(canonical.AsError(err))
		}
	}
	rev, err := f.store.save(sctx, p.rec, 0)
	if err != nil {
		return nil, fromCanonical(err)
	}
	p.rev = rev
	f.settling.writing(id, true) // until finish or forget
	return p, nil
}

// resolveReferences replaces each item_reference of input with the item
// it names, read from the caller's stored response whose id the item's
// carries (itemID): the AI SDK sends earlier turns' items so when it
// stores responses (its default). A reference to an item of no response
// of the caller's is refused as OpenAI refuses it.
func (f *Frontend) resolveReferences(ctx context.Context, input []item) ([]item, *apiError) {
	var loaded map[string]*record
	for i := range input {
		if input[i].Type != "item_reference" {
			continue
		}
		id := input[i].ID
		notFound := invalid(fmt.Sprintf("input[%d].id", i), fmt.Sprintf("Item with id '%s' not found.", id))
		respID := referencedResponse(id)
		if respID == "" {
			return nil, notFound
		}
		rec, ok := loaded[respID]
		if !ok {
			var e *apiError
			if rec, _, e = f.load(ctx, respID); e != nil && e.status != http.StatusNotFound {
				return nil, e
			}
			if loaded == nil {
				loaded = map[string]*record{}
			}
			loaded[respID] = rec
		}
		it, found := rec.item(id)
		if !found {
			return nil, notFound
		}
		input[i] = it
	}
	return input, nil
}

// inputPrefix is the id prefix of an input item of type t.
func inputPrefix(t string) string {
	switch t {
	case "function_call":
		return "fc_"
	case "function_call_output":
		return "fco_"
	case "custom_tool_call":
		return "ctc_"
	case "custom_tool_call_output":
		return "ctco_"
	case "reasoning":
		return "rs_"
	}
	return "msg_"
}

// textWithFormat is the request's text config as its response echoes it:
// with OpenAI's default format, text, when it sets none (Codex sends only
// verbosity).
func textWithFormat(v json.Value) json.Value {
	if len(v) == 0 || string(v) == "null" {
		return json.Value(`{"format":{"type":"text"}}`)
	}
	var m map[string]any
	if json.Unmarshal(v, &m) != nil || m["format"] != nil {
		return v
	}
	m["format"] = map[string]any{"type": "text"}
	out, err := json.Marshal(m, json.Deterministic(true))
	if err != nil {
		return v
	}
	return out
}

// echoTools is the tools the request offered as its response echoes them.
func echoTools(ts []offeredTool) []echoedTool {
	out := make([]echoedTool, len(ts))
	for i, o := range ts {
		t := &ts[i].tool
		out[i] = echoedTool{Type: t.Type, Name: t.Name, Description: t.Description, Strict: t.Strict, Namespace: o.namespace}
		if len(t.Parameters) > 0 {
			out[i].Parameters = &t.Parameters
		}
	}
	return out
}

// newResponse is the response object a request starts: in progress, the
// request's settings echoed, OpenAI's defaults where it set none.
func newResponse(c *createRequest, id string, created time.Time, store bool) *response {
	r := &response{
		ID: id, Object: "response", CreatedAt: created.Unix(), Status: "in_progress", Model: c.Model,
		Instructions: c.Instructions, MaxOutputTokens: c.MaxOutputTokens, MaxToolCalls: c.MaxToolCalls,
		ParallelToolCalls: deref(c.ParallelToolCalls, true), PreviousResponseID: c.PreviousResponseID,
		ServiceTier: "default", Store: store, Temperature: deref(c.Temperature, 1), TopP: deref(c.TopP, 1),
		Text: c.Text, ToolChoice: c.ToolChoice, Tools: echoTools(offeredTools(c.Tools)), TopLogprobs: deref(c.TopLogprobs, 0),
		Truncation: deref(c.Truncation, "disabled"), User: c.User, Metadata: c.Metadata,
		SafetyIdentifier: c.SafetyIdentifier, PromptCacheKey: c.PromptCacheKey, Output: []item{},
	}
	r.Text = textWithFormat(r.Text)
	if len(r.ToolChoice) == 0 || string(r.ToolChoice) == "null" {
		r.ToolChoice = json.Value(`"auto"`)
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	if c.Reasoning != nil {
		r.Reasoning = *c.Reasoning
	}
	if c.Background != nil && *c.Background {
		r.Background, r.Status = true, "queued"
	}
	return r
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// run starts the run and writes its events: as a stream, or the response
// object at the end; a stored response's record is updated at the end.
func (f *Frontend) run(w http.ResponseWriter, r *http.Request, c *createRequest, p *prepared) {
	stream, err := f.cfg.Runner.Run(r.Context(), p.req)
	if err != nil {
		f.forget(r.Context(), p)
		fromCanonical(canonical.AsError(err)).write(w)
		return
	}
	stream = canonical.AnswerStream(stream, f.cfg.MaxOutputBytes) // an agent's answer, on the root (doc.go)
	defer stream.Close()                                          // cancels the run if the client left
	streaming := c.Stream != nil && *c.Stream
	out := &writer{}
	if streaming {
		sw, err := sse.NewWriter(w)
		if err != nil {
			fromCanonical(canonical.Errorf(canonical.CodeInternal, "the response cannot stream")).write(w)
			return
		}
		out.sw = sw
		sse.SetHeaders(w.Header())
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.WriteHeader(http.StatusOK)
	}
	summary := c.Reasoning != nil && c.Reasoning.Summary != nil
	enc := newEncoder(p.r, summary, f.cfg.MaxOutputBytes, out.event)
	stop := func() {}
	if streaming {
		stop = out.keepalive(f.cfg.KeepAlive)
	}
	gone := f.pump(stream, enc, out)
	stop()
	f.finish(r.Context(), p, enc)
	switch {
	case gone:
	case streaming:
		out.end(f.cfg.NoDone)
	case enc.lastError != nil:
		e := fromCanonical(enc.lastError)
		e.code = failureCode(enc.lastError.Code)
		e.write(w)
	default:
		writeJSON(w, http.StatusOK, p.r)
	}
}

// pump feeds the run's events to the encoder until the response ends; it
// reports whether the client went away (the run is then cancelled by the
// caller's Close, and the response is recorded as cancelled).
func (f *Frontend) pump(stream canonical.Stream, enc *encoder, out *writer) (gone bool) {
	ready, _ := stream.(canonical.Buffered)
	fail := func(e *canonical.Error) bool {
		if err := enc.fail(e); err != nil {
			return true
		}
		return false
	}
	if err := enc.start(); err != nil {
		return true
	}
	for !enc.done {
		if (ready == nil || ready.Buffered() == 0) && out.flushIfQueued() || out.isGone() {
			enc.r.Status = "cancelled"
			return true
		}
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = canonical.Errorf(canonical.CodeInternal, "the run ended without a terminal event")
			}
			return fail(canonical.AsError(err))
		}
		if err := enc.event(ev); err != nil {
			if out.isGone() {
				continue
			}
			return fail(canonical.AsError(err)) // the output limit
		}
	}
	return out.isGone()
}

// finish records the ended response, or forgets one that is not stored.
func (f *Frontend) finish(ctx context.Context, p *prepared, enc *encoder) {
	if p.rec == nil {
		return
	}
	defer f.settling.writing(p.r.ID, false)
	p.rec.Response = *enc.r
	sctx, cancel := f.storeCtx(ctx)
	defer cancel()
	if _, err := f.store.save(sctx, p.rec, p.rev); err != nil {
		if err.Code == canonical.CodeResourceExhausted { // keep the response, without its conversation
			p.rec.Context, p.rec.Input = nil, nil
			if _, err2 := f.store.save(sctx, p.rec, p.rev); err2 == nil {
				return
			}
		}
		f.log.Warn("response not stored", "thread", p.r.ID, "code", err.Code.String(), "err", err)
	}
}

// forget removes the record of a response whose run did not start.
func (f *Frontend) forget(ctx context.Context, p *prepared) {
	if p.rec == nil {
		return
	}
	defer f.settling.writing(p.r.ID, false)
	sctx, cancel := f.storeCtx(ctx)
	defer cancel()
	_ = f.store.remove(sctx, p.r.ID)
}

// eventWire is where a streamed response's events are written: an SSE
// stream (sse.Writer), or a WebSocket's messages (wsEvents).
type eventWire interface {
	QueueEvent(id, event string, data []byte) error
	Queued() int
	Flush() error
	Comment(text string) error
	Data(data []byte) error
}

// writer writes one response's events: SSE or WebSocket messages (sw set), or nothing until
// the end (a non-streaming response). Its methods may be called from the
// response's goroutine and its keepalive loop.
type writer struct {
	sw     eventWire
	mu     sync.Mutex
	failed bool           // a write failed: the client is gone
	ka     *sse.Keepalive // once keepalive started one, told of each write
	// data holds the event being queued, reused: QueueEvent copies it.
	data bytes.Buffer
	// delta is the template of the open block's delta events (nil: they
	// are marshalled), made for the members they share (deltaKey):
	// marshalling every delta was a third of the CPU an unpaced
	// responses:triton server spent.
	delta    *json.Template
	deltaKey deltaKey
	buf      []byte // a delta's event, reused
	// held are the events that end the response (error, response.failed,
	// .incomplete, .completed), written by end: the caller records the
	// end first, so a client that read it and at once retrieves or
	// continues the response finds it ended, not in_progress. Queued, an
	// event of sse.BatchBytes or more would be sent at once.
	held []heldEvent
}

type heldEvent struct {
	typ  string
	data []byte
}

// endsResponse reports whether an event of type typ ends the response.
func endsResponse(typ string) bool {
	switch typ {
	case "error", "response.completed", "response.failed", "response.incomplete":
		return true
	}
	return false
}

// deltaKey is what a block's delta events share: all their members but
// the sequence number and the delta.
type deltaKey struct {
	typ, item                           string
	output, content, summary            int
	hasContent, hasSummary, hasLogprobs bool
}

func deltaKeyOf(ev *streamEvent) deltaKey {
	k := deltaKey{typ: ev.Type, item: ev.ItemID, hasLogprobs: ev.Logprobs != nil}
	if ev.OutputIndex != nil {
		k.output = *ev.OutputIndex
	}
	if ev.ContentIndex != nil {
		k.content, k.hasContent = *ev.ContentIndex, true
	}
	if ev.SummaryIndex != nil {
		k.summary, k.hasSummary = *ev.SummaryIndex, true
	}
	return k
}

// fill makes the delta events of k with sequence number n and delta
// s, for their template.
func (k deltaKey) fill(n int64, s string) any {
	ev := &streamEvent{Type: k.typ, SequenceNumber: n, ItemID: k.item, OutputIndex: &k.output, Delta: &s}
	if k.hasContent {
		ev.ContentIndex = &k.content
	}
	if k.hasSummary {
		ev.SummaryIndex = &k.summary
	}
	if k.hasLogprobs {
		ev.Logprobs = &noLogprobs
	}
	return ev
}

// plainDelta reports whether ev has a delta event's members and no other
// (deltaKey and the delta say it all).
func plainDelta(ev *streamEvent) bool {
	others := ev.Response != nil || ev.Item != nil || ev.Part != nil || ev.Text != nil || ev.Name != "" ||
		ev.Arguments != nil || ev.Code != nil || ev.Message != nil || ev.Param != nil || ev.Error != nil
	return !others && ev.Delta != nil && ev.OutputIndex != nil && (ev.Logprobs == nil || len(*ev.Logprobs) == 0)
}

// deltaEvent writes a delta event from its block's template; false when
// the template leaves it to Marshal (or ev has members a delta has not).
func (o *writer) deltaEvent(ev *streamEvent) ([]byte, bool) {
	if !plainDelta(ev) {
		return nil, false
	}
	if k := deltaKeyOf(ev); o.delta == nil || k != o.deltaKey {
		o.deltaKey = k
		o.delta, _ = json.NewTemplate(k.fill)
	}
	if o.delta == nil {
		return nil, false
	}
	b, ok := o.delta.Append(o.buf[:0], ev.SequenceNumber, *ev.Delta)
	o.buf = b
	return b, ok
}

// event queues ev as an SSE event named by its type.
func (o *writer) event(ev *streamEvent) error {
	if o.sw == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed {
		return nil
	}
	data, ok := o.deltaEvent(ev)
	if !ok {
		o.data.Reset()
		if err := json.MarshalWrite(&o.data, ev, json.Deterministic(true)); err != nil {
			return canonical.Errorf(canonical.CodeInternal, "an event cannot be written: %v", err)
		}
		data = o.data.Bytes()
	}
	if len(o.held) > 0 || endsResponse(ev.Type) {
		o.held = append(o.held, heldEvent{ev.Type, bytes.Clone(data)})
		return nil
	}
	if err := o.sw.QueueEvent("", ev.Type, data); err != nil {
		o.failed = true
		return err
	}
	o.wrote()
	return nil
}

// flushIfQueued writes the queued events; it reports whether the client
// is gone.
func (o *writer) flushIfQueued() (gone bool) {
	if o.sw == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.failed && o.sw.Queued() > 0 {
		if err := o.sw.Flush(); err != nil {
			o.failed = true
		}
		o.wrote()
	}
	return o.failed
}

// isGone reports whether a write failed.
func (o *writer) isGone() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed
}

// end writes the held events, then data: [DONE] (unless noDone), and
// flushes.
func (o *writer) end(noDone bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed {
		return
	}
	for _, ev := range o.held {
		_ = o.sw.QueueEvent("", ev.typ, ev.data)
	}
	if !noDone {
		_ = o.sw.Data([]byte("[DONE]"))
	}
	_ = o.sw.Flush()
}

// keepalive writes ": keepalive" whenever the stream has been silent for
// every (a keepalive event would fail Open Responses' compliance checks);
// the returned function stops it.
func (o *writer) keepalive(every time.Duration) (stop func()) {
	ka := sse.NewKeepalive(&o.mu, every, func() error {
		if o.failed {
			return errGone
		}
		err := o.sw.Comment("keepalive")
		o.failed = err != nil
		return err
	})
	o.mu.Lock()
	o.ka = ka
	o.mu.Unlock()
	return ka.Stop // a stopped keepalive may still be told of writes
}

// wrote tells the keepalive of a write; the caller holds o.mu.
func (o *writer) wrote() {
	if o.ka != nil {
		o.ka.Wrote()
	}
}

// errGone stops a keepalive whose client a write found gone.
var errGone = errors.New("the client is gone")
