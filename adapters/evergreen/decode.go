package evergreen

import (
	"encoding/base64"
	"net"
	"net/url"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Wire -> canonical: a GENERATE action and its input tree become a
// canonical Request (frontend); an upstream's output nodes become canonical
// events (backend).

// ActionGenerate is the only action the adapter serves and sends.
const ActionGenerate = "GENERATE"

// Canonical names the adapter uses.
const (
	// inputPrompt is the canonical input name of a GENERATE prompt,
	// whichever of prompt and text the client used.
	inputPrompt = "prompt"
	// extConfigs carries the action configs whose type the bridge does not
	// know: a list of {"@type": url, "value": base64}, re-sent by the
	// Evergreen backend.
	extConfigs = "evergreen.configs"
	// structType is the one config type mapped to canonical parameters.
	structType = "google.protobuf.Struct"
	// metaFileName is the canonical Node.metadata key of
	// ChunkMetadata.original_file_name.
	metaFileName = "original_file_name"
)

// generate is a validated GENERATE action.
type generate struct {
	spec   *ev.Action
	target string
	input  *node
	// response holds the response and text outputs (the same content),
	// in the action's order; names their parameter names.
	response []*node
	names    []string
	// reasoning and tools are the optional outputs, nil when not asked.
	reasoning, tools *node
	params           map[string]*structpb.Value
	configs          []any // unknown configs, for extConfigs
	unknownTypes     []string
	started          bool
}

// parseAction validates a (non-retransmitted) action against the session's
// store and reserves its outputs. resolve maps target_spec.id to a target
// (false: unknown).
func parseAction(s *store, a *ev.Action, resolve func(string) (string, bool)) (*generate, error) {
	if a.GetName() != ActionGenerate {
		return nil, canonical.Errorf(canonical.CodeUnimplemented, "action %q is not supported (this server implements GENERATE)", a.GetName())
	}
	g := &generate{spec: a}
	var inputID string
	for _, in := range a.GetInputs() {
		switch in.GetName() {
		case "prompt", "text":
		default:
			return nil, invalid("GENERATE: unknown input name %q (want prompt or text)", in.GetName())
		}
		if inputID != "" {
			return nil, invalid("GENERATE: more than one input (%q); want exactly one, prompt or text", in.GetName())
		}
		if in.GetId() == "" {
			return nil, invalid("GENERATE: input %q has an empty id", in.GetName())
		}
		inputID = in.GetId()
	}
	if inputID == "" {
		return nil, invalid("GENERATE: no input; want exactly one, named prompt or text")
	}
	seen := map[string]bool{}
	ids := map[string]bool{}
	for _, o := range a.GetOutputs() {
		name, id := o.GetName(), o.GetId()
		switch name {
		case OutputResponse, OutputText, OutputReasoning, OutputToolCalls:
		default:
			return nil, invalid("GENERATE: unknown output name %q (want response, text, reasoning or tool_calls)", name)
		}
		if seen[name] {
			return nil, invalid("GENERATE: output name %q appears twice", name)
		}
		seen[name] = true
		switch {
		case id == "":
			return nil, invalid("GENERATE: output %q has an empty id", name)
		case ids[id]:
			return nil, invalid("GENERATE: output id %q is bound to two outputs (output ids must be new)", id)
		case id == inputID:
			return nil, invalid("GENERATE: output id %q is also the input id", id)
		}
		ids[id] = true
	}
	if len(a.GetOutputs()) == 0 {
		return nil, invalid("GENERATE: no output; want response, text, reasoning or tool_calls")
	}
	target, ok := resolve(a.GetTargetSpec().GetId())
	if !ok {
		return nil, canonical.Errorf(canonical.CodeNotFound, "target_spec.id %q: unknown target", a.GetTargetSpec().GetId())
	}
	g.target = target
	for i, c := range a.GetConfigs() {
		if err := g.config(i, c); err != nil {
			return nil, err
		}
	}
	for _, o := range a.GetOutputs() {
		if n := s.get(o.GetId()); n != nil && (n.ours || n.maxSeq >= 0) {
			return nil, invalid("GENERATE: output id %q is already used in the session (output ids must be new)", o.GetId())
		}
	}
	in, err := s.node(inputID)
	if err != nil {
		return nil, err
	}
	g.input = in
	for _, o := range a.GetOutputs() {
		n, err := s.reserve(o.GetId())
		if err != nil {
			return nil, err
		}
		if p := s.path(in, n); p != nil {
			return nil, invalid("GENERATE: output %q is part of the action's own input (%s); the action could never start", n.id, joinPath(p))
		}
		n.guard = in
		switch o.GetName() {
		case OutputResponse, OutputText:
			g.response = append(g.response, n)
			g.names = append(g.names, o.GetName())
		case OutputReasoning:
			g.reasoning = n
		case OutputToolCalls:
			g.tools = n
		}
	}
	return g, nil
}

// config maps one action config: a google.protobuf.Struct gives canonical
// parameters; other types are kept for an Evergreen upstream and otherwise
// ignored.
func (g *generate) config(i int, c *anypb.Any) error {
	name := c.GetTypeUrl()
	if j := strings.LastIndexByte(name, '/'); j >= 0 {
		name = name[j+1:]
	}
	if name == structType {
		var st structpb.Struct
		if err := c.UnmarshalTo(&st); err != nil {
			return invalid("GENERATE: configs[%d]: bad google.protobuf.Struct: %v", i, err)
		}
		if g.params == nil {
			g.params = map[string]*structpb.Value{}
		}
		for k, v := range st.GetFields() {
			g.params[k] = v
		}
		return nil
	}
	g.unknownTypes = append(g.unknownTypes, c.GetTypeUrl())
	g.configs = append(g.configs, map[string]any{"@type": c.GetTypeUrl(), "value": base64.StdEncoding.EncodeToString(c.GetValue())})
	return nil
}

// request builds the canonical Request of a ready action: the input tree
// flattened under the reference's rules, roles mapped.
func (g *generate) request(s *store, thread string, refs *refPolicy) (*canonical.Request, error) {
	f := flattener{s: s, refs: refs, memo: map[*node]*canonical.Node{}, size: map[*node]expansion{}}
	if x := f.measure(g.input); x.nodes > int64(s.lim.MaxNodes) || x.bytes > s.lim.MaxBytes {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted,
			"input %q expands to more than %d nodes (max_nodes) or %d bytes (max_bytes) with shared children counted once per use",
			g.input.id, s.lim.MaxNodes, s.lim.MaxBytes)
	}
	root, err := f.node(g.input)
	if err != nil {
		return nil, err
	}
	if root == nil {
		root = &canonical.Node{Id: g.input.id}
	}
	req := &canonical.Request{
		ThreadId:   thread,
		Target:     g.target,
		Inputs:     []*canonical.NamedNode{{Name: inputPrompt, Node: root}},
		Parameters: g.params,
	}
	for i, n := range g.response {
		req.Outputs = append(req.Outputs, &canonical.NamedNode{Name: g.names[i], Node: &canonical.Node{Id: n.id}})
	}
	if g.reasoning != nil {
		req.Outputs = append(req.Outputs, &canonical.NamedNode{Name: OutputReasoning, Node: &canonical.Node{Id: g.reasoning.id}})
	}
	if g.tools != nil {
		req.Outputs = append(req.Outputs, &canonical.NamedNode{Name: OutputToolCalls, Node: &canonical.Node{Id: g.tools.id}})
	}
	if len(g.configs) > 0 {
		req.Extensions = map[string]*structpb.Value{extConfigs: canonical.Value(g.configs)}
	}
	return req, nil
}

// expansion is what a node's flattened tree holds, shared children counted
// once per use, saturating past the limits.
type expansion struct{ nodes, bytes int64 }

// flattener turns a complete node tree into canonical Nodes, building each
// store node once (shared children share their canonical Node).
type flattener struct {
	s    *store
	refs *refPolicy
	memo map[*node]*canonical.Node
	size map[*node]expansion
}

func (f *flattener) measure(n *node) expansion {
	if x, ok := f.size[n]; ok {
		return x
	}
	x := expansion{nodes: 1}
	for _, c := range n.chunks {
		x.bytes += int64(len(c.data))
		for _, r := range c.refs {
			x.bytes += int64(len(r))
		}
	}
	capN, capB := int64(f.s.lim.MaxNodes)+1, f.s.lim.MaxBytes+1
	for _, c := range n.children {
		cx := f.measure(c)
		x.nodes = min(x.nodes+cx.nodes, capN)
		x.bytes = min(x.bytes+cx.bytes, capB)
	}
	f.size[n] = x
	return x
}

// node returns n's canonical form, or nil when n holds no chunk.
func (f *flattener) node(n *node) (*canonical.Node, error) {
	if c, ok := f.memo[n]; ok {
		return c, nil
	}
	var out *canonical.Node
	if n.kind == kindParent {
		var kids []*canonical.Node
		for _, c := range n.children {
			k, err := f.node(c)
			if err != nil {
				return nil, err
			}
			if k != nil {
				kids = append(kids, k)
			}
		}
		if len(kids) > 0 {
			out = &canonical.Node{Id: n.id, Children: kids}
		}
	} else {
		var parts []*canonical.Node
		for i := range n.chunks {
			p, err := f.chunk(n, &n.chunks[i])
			if err != nil {
				return nil, err
			}
			parts = append(parts, p...)
		}
		switch len(parts) {
		case 0:
		case 1:
			out = parts[0]
			out.Id = n.id
		default:
			out = &canonical.Node{Id: n.id, Children: parts}
		}
	}
	f.memo[n] = out
	return out, nil
}

// chunk returns a chunk's canonical leaves: one, or one per ref.
func (f *flattener) chunk(n *node, c *chunk) ([]*canonical.Node, error) {
	leaf := func() *canonical.Node {
		m := c.meta.GetMimetype()
		if m == "" {
			m = mimeDefault
		}
		l := &canonical.Node{Mime: normalizeMime(m), Role: roleIn(c.meta.GetRole(), !n.ours)}
		if fn := c.meta.GetOriginalFileName(); fn != "" {
			l.Metadata = map[string]string{metaFileName: fn}
		}
		return l
	}
	if len(c.refs) == 0 {
		l := leaf()
		if c.data != nil || !isEndOfTurn(l.Mime) {
			l.Payload = canonical.DataPayload(c.data)
		}
		if isEndOfTurn(l.Mime) {
			l.Mime = MimeEndOfTurn
		}
		return []*canonical.Node{l}, nil
	}
	out := make([]*canonical.Node, 0, len(c.refs))
	for _, r := range c.refs {
		if err := f.refs.check(n.id, r); err != nil {
			return nil, err
		}
		l := leaf()
		l.Payload = canonical.RefPayload(r)
		out = append(out, l)
	}
	return out, nil
}

// roleIn maps an Evergreen role to the canonical one: "model" is
// "assistant"; an empty role on a client's chunk is "user" (an empty role on
// a chunk we produced cannot happen: we always set "model").
func roleIn(r string, fromPeer bool) string {
	switch r {
	case "model":
		return "assistant"
	case "":
		if fromPeer {
			return "user"
		}
		return "assistant"
	}
	return r
}

// roleOut maps a canonical role to the Evergreen one: "assistant" (and an
// unset role on generated content) is "model".
func roleOut(r string) string {
	if r == "assistant" || r == "" {
		return "model"
	}
	return r
}

// refPolicy decides what happens to a ref URI in an input (section 3.7):
// http and https refs pass on as refs (fetched only from allowlisted
// origins), file refs are refused, any other scheme is refused.
type refPolicy struct {
	fetch map[string]bool // allowlisted origins, "scheme://host[:port]"
}

func newRefPolicy(origins []string) *refPolicy {
	p := &refPolicy{fetch: map[string]bool{}}
	for _, o := range origins {
		if n, err := parseOrigin(o); err == nil {
			p.fetch[n] = true
		}
	}
	return p
}

func (p *refPolicy) check(id, ref string) error {
	u, err := url.Parse(ref)
	if err != nil {
		return invalid("node %q: ref %q is not a URI: %v", id, ref, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		if u.Host == "" {
			return invalid("node %q: ref %q has no host", id, ref)
		}
		if privateHost(u.Hostname()) && !p.fetches(ref) {
			return invalid("node %q: ref %q points at a loopback or private address; allowlist its origin in fetch_refs to use it", id, ref)
		}
		return nil
	case "file":
		return invalid("node %q: ref %q is refused: the bridge never reads local files", id, ref)
	case "":
		return invalid("node %q: ref %q has no scheme (http and https refs are passed on)", id, ref)
	}
	return invalid("node %q: ref %q: scheme %q is not supported (http and https refs are passed on)", id, ref, u.Scheme)
}

// privateHost reports whether host is localhost or a loopback, private,
// link-local or unspecified address: refs there reach the bridge's own
// network, so they are refused unless allowlisted.
func privateHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsLinkLocalMulticast() || ip.IsUnspecified())
}

// fetches reports whether ref's origin is allowlisted for fetching.
func (p *refPolicy) fetches(ref string) bool {
	if p == nil || len(p.fetch) == 0 {
		return false
	}
	u, err := url.Parse(ref)
	if err != nil {
		return false
	}
	return p.fetch[strings.ToLower(u.Scheme)+"://"+strings.ToLower(u.Host)]
}

// The backend direction: the upstream's output nodes, assembled in a store,
// become canonical events in flattened order. Parts (leaves) of one output
// follow depth-first order; parts of different outputs are ordered by the
// arrival of their first fragment, and a part, once started, is finished
// before the next one starts (blocks never interleave). Only what that
// order requires waits, in the store, within its limits.

// partMode is how a part becomes canonical events.
type partMode uint8

const (
	modeText      partMode = iota // text block, streamed
	modeReasoning                 // reasoning block, streamed
	modeData                      // data block, whole when done
	modeRef                       // one ref block per ref, when done
	modeTool                      // tool_calls JSON, whole when done
	modeSkip                      // EndOfTurn and empty leaves
)

// walker walks one output's tree depth-first.
type walker struct {
	name  string
	root  *node
	stack []frame
}

type frame struct {
	n *node
	i int
}

// peek returns the walker's next leaf, or nil when it must wait; eof when
// the output is exhausted.
func (w *walker) peek() (leaf *node, eof bool) {
	for len(w.stack) > 0 {
		top := &w.stack[len(w.stack)-1]
		n := top.n
		switch n.kind {
		case kindLeaf:
			return n, false
		case kindParent:
			if top.i < len(n.children) {
				c := n.children[top.i]
				top.i++
				w.stack = append(w.stack, frame{n: c})
				continue
			}
		}
		if !n.done {
			return nil, false
		}
		w.stack = w.stack[:len(w.stack)-1]
	}
	return nil, true
}

// pop drops the leaf peek returned.
func (w *walker) pop() { w.stack = w.stack[:len(w.stack)-1] }

// part is the leaf being turned into events.
type part struct {
	w    *walker
	n    *node
	mode partMode
	ci   int // chunk index
	off  int // bytes of chunk ci consumed
	acc  canonical.TextAccumulator
}

// outputDecoder turns an upstream's output nodes into canonical events.
type outputDecoder struct {
	outs     []*walker
	b        *canonical.Builder
	cur      *part
	role     string
	toolMsg  bool // the open message holds a tool call
	maxChunk int
}

func newOutputDecoder(outputs map[string]*node, order []string, maxChunk int) *outputDecoder {
	d := &outputDecoder{b: canonical.NewBuilder(), maxChunk: maxChunk}
	for _, name := range order {
		n := outputs[name]
		d.outs = append(d.outs, &walker{name: name, root: n, stack: []frame{{n: n}}})
	}
	return d
}

// complete reports whether every output has been received whole.
func (d *outputDecoder) complete() bool {
	for _, w := range d.outs {
		if !w.root.complete {
			return false
		}
	}
	return true
}

// incomplete names the first output not received whole.
func (d *outputDecoder) incomplete() string {
	for _, w := range d.outs {
		if !w.root.complete {
			return w.name
		}
	}
	return ""
}

// feed takes one upstream message: its fragments go to st, then the
// events they allow are appended; the first violation is returned after
// them, so what arrived before it is delivered however the upstream
// grouped its fragments. A protocol violation is the upstream's fault:
// INTERNAL.
func (d *outputDecoder) feed(st *store, m *ev.SessionMessage, out []*canonical.Event) ([]*canonical.Event, error) {
	var bad error
	for _, f := range m.GetNodeFragments() {
		if err := st.apply(f); err != nil {
			ce := canonical.AsError(err)
			if ce.Code == canonical.CodeInvalidArgument {
				ce = canonical.Errorf(canonical.CodeInternal, "evergreen upstream broke the protocol: %s", ce.Message)
			}
			bad = ce
			break
		}
	}
	out, err := d.advance(out)
	if bad != nil {
		return out, bad
	}
	return out, err
}

// advance appends the events the store's state allows.
func (d *outputDecoder) advance(out []*canonical.Event) ([]*canonical.Event, error) {
	for {
		if p := d.cur; p != nil {
			var done bool
			var err error
			out, done, err = d.pump(out, p)
			if err != nil || !done {
				return out, err
			}
			p.w.pop()
			d.cur = nil
		}
		var best *walker
		var leaf *node
		for _, w := range d.outs {
			n, _ := w.peek()
			if n == nil || (len(n.chunks) == 0 && !n.done) {
				continue
			}
			if best == nil || n.order < leaf.order {
				best, leaf = w, n
			}
		}
		if best == nil {
			return out, nil
		}
		d.cur = &part{w: best, n: leaf, mode: d.modeOf(best.name, leaf)}
		if d.cur.mode == modeText || d.cur.mode == modeReasoning {
			out = d.message(out, leaf)
		}
	}
}

func (d *outputDecoder) modeOf(output string, n *node) partMode {
	if len(n.chunks) == 0 {
		return modeSkip
	}
	m := n.chunks[0].meta.GetMimetype()
	switch {
	case isEndOfTurn(m):
		return modeSkip
	case n.pay == payloadRef:
		return modeRef
	case output == OutputToolCalls:
		return modeTool
	case isTextMime(m) && output == OutputReasoning:
		return modeReasoning
	case isTextMime(m):
		return modeText
	}
	return modeData
}

// message opens a message for the part's role if the open one has
// another.
func (d *outputDecoder) message(out []*canonical.Event, n *node) []*canonical.Event {
	role := "assistant"
	if len(n.chunks) > 0 {
		role = roleIn(n.chunks[0].meta.GetRole(), false)
	}
	if role != d.role {
		out = d.finishMessage(out)
		out = d.b.StartMessage(out, "", role)
		d.role = role
	}
	return out
}

func (d *outputDecoder) finishMessage(out []*canonical.Event) []*canonical.Event {
	reason := canonical.FinishStop
	if d.toolMsg {
		reason = canonical.FinishToolCalls
	}
	n := len(out)
	out = d.b.FinishMessage(out, reason, nil)
	if len(out) > n {
		d.role, d.toolMsg = "", false
	}
	return out
}

// pump emits what part p has received; done when p is finished.
func (d *outputDecoder) pump(out []*canonical.Event, p *part) ([]*canonical.Event, bool, error) {
	n := p.n
	switch p.mode {
	case modeText, modeReasoning:
		for p.ci < len(n.chunks) {
			c := &n.chunks[p.ci]
			if p.off < len(c.data) {
				s := p.acc.Append(c.data[p.off:])
				p.off = len(c.data)
				out = d.text(out, p.mode, s)
			}
			if p.ci == len(n.chunks)-1 {
				break
			}
			p.ci, p.off = p.ci+1, 0
		}
		if !n.done {
			return out, false, nil
		}
		out = d.text(out, p.mode, p.acc.Flush())
		return d.b.FinishBlock(out), true, nil
	case modeTool:
		size := 0
		for _, c := range n.chunks {
			size += len(c.data)
		}
		if size > d.maxChunk {
			return out, false, canonical.Errorf(canonical.CodeResourceExhausted,
				"evergreen upstream: tool_calls chunk %q exceeds %d bytes (max_tool_chunk_bytes)", n.id, d.maxChunk)
		}
	}
	if !n.done {
		return out, false, nil
	}
	switch p.mode {
	case modeData:
		for _, c := range n.chunks {
			m := c.meta.GetMimetype()
			if m == "" {
				m = mimeDefault
			}
			out = d.message(out, n)
			out = d.b.Data(out, normalizeMime(m), c.data)
		}
	case modeRef:
		for _, c := range n.chunks {
			for _, r := range c.refs {
				out = d.message(out, n)
				out = d.b.Ref(out, normalizeMime(c.meta.GetMimetype()), r)
			}
		}
	case modeTool:
		for _, c := range n.chunks {
			var err error
			if out, err = d.tool(out, n, c.data); err != nil {
				return out, false, err
			}
		}
	}
	return out, true, nil
}

func (d *outputDecoder) text(out []*canonical.Event, m partMode, s string) []*canonical.Event {
	if m == modeReasoning {
		return d.b.Reasoning(out, s)
	}
	return d.b.Text(out, s)
}

// toolEvent is one chunk of the tool_calls output: a tool call, a tool
// event, or a request for input, as JSON (MimeToolEvent).
type toolEvent struct {
	// Type is tool_call, tool_started, tool_output, tool_finished,
	// tool_failed or input_requested.
	Type string `json:"type"`
	// ID is the tool call id (interrupt id for input_requested).
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// Arguments is a tool call's argument JSON text, as streamed.
	Arguments string `json:"arguments,omitempty"`
	// Input, Output and Payload are omitzero, not omitempty: a JSON null
	// (a tool that returned null) is written, as encoding/json wrote it;
	// only an absent value is left out.
	Input   json.Value `json:"input,omitzero"`
	Delta   string     `json:"delta,omitempty"`
	Output  json.Value `json:"output,omitzero"`
	Error   *toolError `json:"error,omitempty"`
	Payload json.Value `json:"payload,omitzero"`
}

// toolReadJSON reads a tool_calls chunk an upstream sent as the bridge
// read it with encoding/json, so no peer's chunk that was accepted is now
// refused: member names match in any case, the last of repeated names
// wins, and invalid UTF-8 in a string becomes U+FFFD (a raw value keeps
// its bytes; protojson then refuses it, as before). The library's
// case-insensitive match also ignores _ and - ("in_put" is input), which
// encoding/json did not; no member of the chunk has either.
var toolReadJSON = json.JoinOptions(json.MatchCaseInsensitiveNames(true), json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true))

type toolError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// tool turns one tool_calls chunk into events.
func (d *outputDecoder) tool(out []*canonical.Event, n *node, data []byte) ([]*canonical.Event, error) {
	var t toolEvent
	if err := json.Unmarshal(data, &t, toolReadJSON); err != nil {
		return out, canonical.Errorf(canonical.CodeInternal, "evergreen upstream: tool_calls chunk %q is not a JSON object: %v", n.id, err)
	}
	value := func(raw json.Value) *structpb.Value {
		if len(raw) == 0 {
			return nil
		}
		v := &structpb.Value{}
		if protojson.Unmarshal(raw, v) != nil {
			return nil
		}
		return v
	}
	var e *canonical.Event
	switch t.Type {
	case "tool_call":
		if d.role != "assistant" {
			out = d.finishMessage(out)
			out = d.b.StartMessage(out, "", "assistant")
			d.role = "assistant"
		}
		out = d.b.ToolCall(out, t.ID, t.Name)
		out = d.b.ToolArgs(out, strings.ToValidUTF8(t.Arguments, "\uFFFD"))
		d.toolMsg = true
		return d.b.FinishBlock(out), nil
	case "tool_started":
		e = &canonical.Event{Kind: &canonical.KindToolStarted{ToolStarted: &canonical.ToolStarted{ToolCallId: t.ID, Name: t.Name, Input: value(t.Input)}}}
	case "tool_output":
		e = &canonical.Event{Kind: &canonical.KindToolOutput{ToolOutput: &canonical.ToolOutput{ToolCallId: t.ID, Delta: strings.ToValidUTF8(t.Delta, "\uFFFD")}}}
	case "tool_finished":
		e = &canonical.Event{Kind: &canonical.KindToolFinished{ToolFinished: &canonical.ToolFinished{ToolCallId: t.ID, Output: value(t.Output)}}}
	case "tool_failed":
		code, ok := canonical.ParseCode(t.Error.codeName())
		if !ok || code == canonical.CodeOK {
			code = canonical.CodeUnknown
		}
		e = &canonical.Event{Kind: &canonical.KindToolFailed{ToolFailed: &canonical.ToolFailed{ToolCallId: t.ID,
			Error: &canonical.ErrorProto{Code: uint32(code), Message: t.Error.message()}}}}
	case "input_requested":
		e = &canonical.Event{Kind: &canonical.KindInputRequested{InputRequested: &canonical.InputRequested{InterruptId: t.ID, Payload: value(t.Payload)}}}
	default:
		v := value(data)
		e = &canonical.Event{Kind: &canonical.KindCustom{Custom: &canonical.Custom{Name: "evergreen.tool_calls", Payload: v}}}
	}
	out = d.finishMessage(out)
	return d.b.Emit(out, e), nil
}

func (e *toolError) codeName() string {
	if e == nil {
		return ""
	}
	return e.Code
}

func (e *toolError) message() string {
	if e == nil {
		return ""
	}
	return e.Message
}
