package evergreen

import (
	"encoding/base64"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// Canonical -> wire: a run's events become the fragments of an action's
// output nodes (frontend); a canonical Request becomes a GENERATE action
// and its input tree (backend).

// sink is where a renderer puts what it produces: messages for the client,
// and the nodes they describe, kept in the session's store so later
// actions may use them as inputs.
type sink interface {
	// send writes one message to the client. The renderer may reuse msg
	// once send returns.
	send(msg *ev.SessionMessage) error
	mint() (*node, error)
	produce(n *node, meta *ev.ChunkMetadata, data []byte) error
	produceRef(n *node, meta *ev.ChunkMetadata, ref string) error
	adopt(p, c *node) error
	finish(n *node) error
}

// out is a node of ours being streamed: its next seq and metadata.
type out struct {
	n    *node
	seq  int32
	meta *ev.ChunkMetadata
}

// response shapes.
const (
	shapeNone uint8 = iota
	shapeLeaf       // one text leaf per response output (the spec's shape)
	shapeTree       // a non-leaf root with a child per part
)

// renderer turns one run's canonical events into the fragments of its
// action's outputs (section 4 of the reference): text streams into one
// leaf per response output, a fragment per delta, closed by an empty final
// fragment; reasoning and tool activity go to the optional outputs as
// children; non-text parts make the response a non-leaf root. One renderer
// per action; not safe for concurrent use.
type renderer struct {
	sk       sink
	json     bool // metadata on every fragment (WebSocket/JSON transport)
	tree     bool // always render the response as a tree
	maxArgs  int
	response []out
	reason   *out // nil when not requested
	tools    *out

	shape  uint8
	part   out // tree: the open response part
	rpart  out // the open reasoning part
	open   canonical.BlockType
	role   string
	text   *ev.ChunkMetadata // text/plain, role
	callID string
	call   string
	args   []byte

	// scratch for the per-delta path
	msg   ev.SessionMessage
	frags [2]ev.NodeFragment
	chs   [2]ev.Chunk
	data  [2]ev.Chunk_Data
	ptrs  [2]*ev.NodeFragment
}

func newRenderer(sk sink, g *generate, json, tree bool, maxArgs int) *renderer {
	r := &renderer{sk: sk, json: json, tree: tree, maxArgs: maxArgs, role: "model"}
	r.text = &ev.ChunkMetadata{Mimetype: MimeText, Role: r.role}
	for _, n := range g.response {
		r.response = append(r.response, out{n: n})
	}
	if g.reasoning != nil {
		r.reason = &out{n: g.reasoning}
	}
	if g.tools != nil {
		r.tools = &out{n: g.tools}
	}
	return r
}

// meta returns the metadata a leaf fragment carries: seq 0's, or (JSON
// transport) every fragment's.
func (r *renderer) meta(o *out) *ev.ChunkMetadata {
	if o.seq == 0 || r.json {
		return o.meta
	}
	return nil
}

// leafFrag is a fragment of leaf o with data; it advances o.seq.
func (r *renderer) leafFrag(o *out, data []byte, continued bool) *ev.NodeFragment {
	f := &ev.NodeFragment{Id: o.n.id, Seq: o.seq, Continued: continued,
		ChunkFragment: &ev.Chunk{Metadata: r.meta(o), Payload: &ev.Chunk_Data{Data: data}}}
	o.seq++
	return f
}

// childFrag lists child c on non-leaf o.
func childFrag(o *out, c *node) *ev.NodeFragment {
	f := &ev.NodeFragment{Id: o.n.id, Seq: o.seq, Continued: true, ChildIds: []string{c.id}}
	o.seq++
	return f
}

// finalFrag closes o with an empty final fragment.
func finalFrag(o *out) *ev.NodeFragment {
	f := &ev.NodeFragment{Id: o.n.id, Seq: o.seq}
	o.seq++
	return f
}

func (r *renderer) send(frags ...*ev.NodeFragment) error {
	return r.sk.send(&ev.SessionMessage{NodeFragments: frags})
}

// event renders one event. It returns done at the run's terminal event,
// and an error that must abort the session (the run failed, or the
// renderer cannot carry what the run produced).
func (r *renderer) event(e *canonical.Event) (done bool, err error) {
	switch k := e.GetKind().(type) {
	case *canonical.KindMessageStart:
		if role := roleOut(k.MessageStart.GetRole()); role != r.role {
			r.role = role
			r.text = &ev.ChunkMetadata{Mimetype: MimeText, Role: role}
		}
	case *canonical.KindBlockStart:
		return false, r.blockStart(k.BlockStart)
	case *canonical.KindBlockDelta:
		return false, r.delta(k.BlockDelta)
	case *canonical.KindBlockFinish:
		return false, r.blockFinish()
	case *canonical.KindToolStarted:
		t := k.ToolStarted
		return false, r.tool(toolEvent{Type: "tool_started", ID: t.GetToolCallId(), Name: t.GetName(), Input: rawJSON(t.GetInput())})
	case *canonical.KindToolOutput:
		t := k.ToolOutput
		return false, r.tool(toolEvent{Type: "tool_output", ID: t.GetToolCallId(), Delta: t.GetDelta()})
	case *canonical.KindToolFinished:
		t := k.ToolFinished
		return false, r.tool(toolEvent{Type: "tool_finished", ID: t.GetToolCallId(), Output: rawJSON(t.GetOutput())})
	case *canonical.KindToolFailed:
		t := k.ToolFailed
		return false, r.tool(toolEvent{Type: "tool_failed", ID: t.GetToolCallId(), Error: &toolError{
			Code: canonical.Code(t.GetError().GetCode()).String(), Message: t.GetError().GetMessage()}})
	case *canonical.KindInputRequested:
		t := k.InputRequested
		return false, r.tool(toolEvent{Type: "input_requested", ID: t.GetInterruptId(), Payload: rawJSON(t.GetPayload())})
	case *canonical.KindLifecycle:
		st, ok := canonical.TerminalOf(e)
		if !ok {
			return false, nil
		}
		switch st {
		case canonical.StatusCompleted:
			return true, r.close()
		case canonical.StatusInterrupted:
			return true, canonical.Errorf(canonical.CodeFailedPrecondition,
				"the run was interrupted to ask for input; Evergreen GENERATE cannot answer an interrupt")
		}
		ce := canonical.FromProto(k.Lifecycle.GetError())
		if ce == nil {
			ce = canonical.Errorf(canonical.CodeUnknown, "run %s", st)
		}
		return true, ce
	}
	return false, nil
}

func rawJSON(v *structpb.Value) json.Value {
	if v == nil {
		return nil
	}
	b, err := protojson.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// decide fixes the response's shape at its first part.
func (r *renderer) decide(t canonical.BlockType) {
	if r.shape != shapeNone {
		return
	}
	r.shape = shapeTree
	if t == canonical.BlockText && !r.tree {
		r.shape = shapeLeaf
		for i := range r.response {
			r.response[i].meta = r.text
		}
	}
}

func (r *renderer) blockStart(b *canonical.BlockStart) error {
	r.open = b.GetType()
	switch t := b.GetType(); t {
	case canonical.BlockText, canonical.BlockData, canonical.BlockRef:
		if len(r.response) == 0 {
			return nil
		}
		r.decide(t)
		if r.shape == shapeLeaf {
			if t == canonical.BlockText {
				return nil
			}
			return canonical.Errorf(canonical.CodeUnimplemented,
				"the run produced a %s part after text, but the response was already streamed as a text leaf (ResponseTree renders mixed content)",
				strings.ToLower(strings.TrimPrefix(t.String(), "BLOCK_TYPE_")))
		}
		meta := r.text
		if t != canonical.BlockText {
			m := b.GetMime()
			if m == "" {
				m = mimeDefault
			}
			meta = &ev.ChunkMetadata{Mimetype: m, Role: r.role}
		}
		c, err := r.sk.mint()
		if err != nil {
			return err
		}
		r.part = out{n: c, meta: meta}
		frags := make([]*ev.NodeFragment, 0, len(r.response)+1)
		for i := range r.response {
			if err := r.sk.adopt(r.response[i].n, c); err != nil {
				return err
			}
			frags = append(frags, childFrag(&r.response[i], c))
		}
		if t == canonical.BlockRef {
			frags = append(frags, &ev.NodeFragment{Id: c.id, ChunkFragment: &ev.Chunk{Metadata: meta, Payload: &ev.Chunk_Ref{Ref: b.GetRef()}}})
			if err := r.send(frags...); err != nil {
				return err
			}
			if err := r.sk.produceRef(c, meta, b.GetRef()); err != nil {
				return err
			}
			return r.sk.finish(c)
		}
		return r.send(frags...)
	case canonical.BlockReasoning:
		if r.reason == nil {
			return nil
		}
		c, err := r.sk.mint()
		if err != nil {
			return err
		}
		if err := r.sk.adopt(r.reason.n, c); err != nil {
			return err
		}
		r.rpart = out{n: c, meta: r.text}
		return r.send(childFrag(r.reason, c))
	case canonical.BlockToolCall:
		r.callID, r.call, r.args = b.GetId(), b.GetName(), r.args[:0]
	}
	return nil
}

func (r *renderer) delta(d *canonical.BlockDelta) error {
	switch r.open {
	case canonical.BlockText:
		if len(r.response) == 0 || d.GetText() == "" {
			return nil
		}
		if r.shape == shapeLeaf {
			return r.leafDelta([]byte(d.GetText()))
		}
		return r.partDelta(&r.part, []byte(d.GetText()))
	case canonical.BlockData:
		if len(r.response) == 0 || len(d.GetData()) == 0 {
			return nil
		}
		return r.partDelta(&r.part, d.GetData())
	case canonical.BlockReasoning:
		if r.reason == nil || d.GetText() == "" {
			return nil
		}
		return r.partDelta(&r.rpart, []byte(d.GetText()))
	case canonical.BlockToolCall:
		if r.tools == nil {
			return nil
		}
		if len(r.args)+len(d.GetText()) > r.maxArgs {
			return canonical.Errorf(canonical.CodeResourceExhausted,
				"tool call %q: arguments exceed %d bytes (MaxToolArgsBytes)", r.callID, r.maxArgs)
		}
		r.args = append(r.args, d.GetText()...)
	}
	return nil
}

// leafDelta is the per-delta path of a text response: one message with a
// fragment per response output, built in reused scratch space.
func (r *renderer) leafDelta(data []byte) error {
	r.msg.NodeFragments = r.ptrs[:0]
	for i := range r.response {
		o := &r.response[i]
		f, c, d := &r.frags[i], &r.chs[i], &r.data[i]
		d.Data = data
		c.Metadata, c.Payload = r.meta(o), d
		f.Id, f.Seq, f.Continued, f.ChildIds, f.ChunkFragment = o.n.id, o.seq, true, nil, c
		o.seq++
		r.msg.NodeFragments = append(r.msg.NodeFragments, f)
	}
	if err := r.sk.send(&r.msg); err != nil {
		return err
	}
	for i := range r.response {
		if err := r.sk.produce(r.response[i].n, r.response[i].meta, data); err != nil {
			return err
		}
	}
	return nil
}

// partDelta streams data into an open part leaf.
func (r *renderer) partDelta(o *out, data []byte) error {
	if err := r.send(r.leafFrag(o, data, true)); err != nil {
		return err
	}
	return r.sk.produce(o.n, o.meta, data)
}

func (r *renderer) blockFinish() error {
	t := r.open
	r.open = 0
	switch t {
	case canonical.BlockText, canonical.BlockData:
		if len(r.response) == 0 || r.shape != shapeTree {
			return nil
		}
		return r.closePart(&r.part)
	case canonical.BlockReasoning:
		if r.reason == nil {
			return nil
		}
		return r.closePart(&r.rpart)
	case canonical.BlockToolCall:
		if r.tools == nil {
			return nil
		}
		return r.tool(toolEvent{Type: "tool_call", ID: r.callID, Name: r.call, Arguments: string(r.args)})
	}
	return nil
}

func (r *renderer) closePart(o *out) error {
	if o.n == nil {
		return nil
	}
	if err := r.send(finalFrag(o)); err != nil {
		return err
	}
	n := o.n
	*o = out{}
	return r.sk.finish(n)
}

// toolWriteJSON writes a tool_calls chunk byte for byte as encoding/json
// wrote it, so clients and stored nodes see the same chunks: <, > and &
// escaped, U+2028 and U+2029 escaped (raw values too), map keys (in the
// conformance peer's chunks) sorted. Invalid UTF-8 is U+FFFD rather than
// a failed chunk; the character itself, where encoding/json wrote the
// escape \ufffd, which any reader takes for the same string.
var toolWriteJSON = json.JoinOptions(json.EscapeForHTML(true), json.EscapeForJS(true),
	json.AllowInvalidUTF8(true), json.Deterministic(true))

// tool renders one tool_calls chunk: a child of the tool_calls root,
// complete in one fragment.
func (r *renderer) tool(t toolEvent) error {
	if r.tools == nil {
		return nil
	}
	data, err := json.Marshal(t, toolWriteJSON)
	if err != nil {
		return canonical.Errorf(canonical.CodeInternal, "encoding a tool_calls chunk: %v", err)
	}
	c, err := r.sk.mint()
	if err != nil {
		return err
	}
	if err := r.sk.adopt(r.tools.n, c); err != nil {
		return err
	}
	o := out{n: c, meta: &ev.ChunkMetadata{Mimetype: MimeToolEvent, Role: r.role}}
	if err := r.send(childFrag(r.tools, c), r.leafFrag(&o, data, false)); err != nil {
		return err
	}
	if err := r.sk.produce(c, o.meta, data); err != nil {
		return err
	}
	return r.sk.finish(c)
}

// close ends every output with its final fragment, in one message.
func (r *renderer) close() error {
	var frags []*ev.NodeFragment
	var roots []*node
	for i := range r.response {
		frags = append(frags, finalFrag(&r.response[i]))
		roots = append(roots, r.response[i].n)
	}
	for _, o := range []*out{r.reason, r.tools} {
		if o != nil {
			frags = append(frags, finalFrag(o))
			roots = append(roots, o.n)
		}
	}
	if err := r.send(frags...); err != nil {
		return err
	}
	for _, n := range roots {
		if err := r.sk.finish(n); err != nil {
			return err
		}
	}
	return nil
}

// The backend direction.

// requestEncoder builds the messages that ask an upstream to GENERATE a
// canonical Request: the action first, then each parent before its
// children, each leaf's fragments in seq order (section 3.10). It records
// every node it sends in the backend's store as ours, so the upstream may
// reference them.
type requestEncoder struct {
	st        *store
	fragBytes int
	ids       map[*canonical.Node]*node
	frags     []*ev.NodeFragment
}

// encodeRequest returns the messages to send and the output nodes to
// await, by output name.
func encodeRequest(st *store, req *canonical.Request, target string, outputs []string, fragBytes int) ([]*ev.SessionMessage, map[string]*node, error) {
	e := &requestEncoder{st: st, fragBytes: fragBytes, ids: map[*canonical.Node]*node{}}
	root, err := st.mint()
	if err != nil {
		return nil, nil, err
	}
	act := &ev.Action{
		Name:       ActionGenerate,
		Inputs:     []*ev.NamedParameter{{Name: "prompt", Id: root.id}},
		TargetSpec: &ev.TargetSpec{Id: target},
	}
	outs := map[string]*node{}
	for _, name := range outputs {
		n, err := st.mint()
		if err != nil {
			return nil, nil, err
		}
		n.ours = false // written by the upstream
		outs[name] = n
		act.Outputs = append(act.Outputs, &ev.NamedParameter{Name: name, Id: n.id})
	}
	if len(req.GetParameters()) > 0 {
		a, err := anypb.New(&structpb.Struct{Fields: req.GetParameters()})
		if err != nil {
			return nil, nil, canonical.Errorf(canonical.CodeInvalidArgument, "parameters: %v", err)
		}
		act.Configs = append(act.Configs, a)
	}
	for i, c := range req.GetExtensions()[extConfigs].GetListValue().GetValues() {
		f := c.GetStructValue().GetFields()
		val, err := base64Decode(f["value"].GetStringValue())
		if err != nil {
			return nil, nil, canonical.Errorf(canonical.CodeInvalidArgument, "extensions[%s][%d].value: %v", extConfigs, i, err)
		}
		act.Configs = append(act.Configs, &anypb.Any{TypeUrl: f["@type"].GetStringValue(), Value: val})
	}
	rootFrag := &ev.NodeFragment{Id: root.id}
	e.frags = append(e.frags, rootFrag)
	root.kind = kindParent
	for _, in := range req.GetInputs() {
		if in.GetNode() == nil {
			continue
		}
		n, err := e.node(in.GetNode())
		if err != nil {
			return nil, nil, err
		}
		if n == nil {
			continue
		}
		rootFrag.ChildIds = append(rootFrag.ChildIds, n.id)
		if err := st.adopt(root, n); err != nil {
			return nil, nil, err
		}
	}
	st.finish(root)
	msgs := []*ev.SessionMessage{{Actions: []*ev.Action{act}}}
	size := 0
	cur := &ev.SessionMessage{}
	for _, f := range e.frags {
		n := len(f.GetChunkFragment().GetData()) + len(f.GetChunkFragment().GetRef()) + 64
		if size+n > e.fragBytes && len(cur.NodeFragments) > 0 {
			msgs = append(msgs, cur)
			cur, size = &ev.SessionMessage{}, 0
		}
		cur.NodeFragments = append(cur.NodeFragments, f)
		size += n
	}
	if len(cur.NodeFragments) > 0 {
		msgs = append(msgs, cur)
	}
	return msgs, outs, nil
}

// node sends canonical node c once (shared nodes stay shared) and returns
// its store node; nil for a leaf with nothing to send.
func (e *requestEncoder) node(c *canonical.Node) (*node, error) {
	if n, ok := e.ids[c]; ok {
		return n, nil
	}
	n, err := e.st.mint()
	if err != nil {
		return nil, err
	}
	e.ids[c] = n
	if len(c.GetChildren()) > 0 {
		f := &ev.NodeFragment{Id: n.id}
		e.frags = append(e.frags, f)
		n.kind = kindParent
		for _, k := range c.GetChildren() {
			kn, err := e.node(k)
			if err != nil {
				return nil, err
			}
			if kn == nil {
				continue
			}
			f.ChildIds = append(f.ChildIds, kn.id)
			if err := e.st.adopt(n, kn); err != nil {
				return nil, err
			}
		}
		e.st.finish(n)
		return n, nil
	}
	mime := c.GetMime()
	if mime == "" {
		mime = MimeText
	}
	meta := &ev.ChunkMetadata{Mimetype: mime, Role: roleWire(c.GetRole()), OriginalFileName: c.GetMetadata()[metaFileName]}
	switch {
	case c.GetRef() != "":
		e.frags = append(e.frags, &ev.NodeFragment{Id: n.id, ChunkFragment: &ev.Chunk{Metadata: meta, Payload: &ev.Chunk_Ref{Ref: c.GetRef()}}})
		if err := e.st.produceRef(n, meta, c.GetRef()); err != nil {
			return nil, err
		}
	case c.GetPayload() == nil: // a metadata-only chunk, such as EndOfTurn
		e.frags = append(e.frags, &ev.NodeFragment{Id: n.id, ChunkFragment: &ev.Chunk{Metadata: meta}})
		if err := e.st.produce(n, meta, nil); err != nil {
			return nil, err
		}
	default:
		data := c.GetData()
		for seq, first := int32(0), true; first || len(data) > 0; seq, first = seq+1, false {
			piece := data[:min(len(data), e.fragBytes)]
			data = data[len(piece):]
			f := &ev.NodeFragment{Id: n.id, Seq: seq, Continued: len(data) > 0, ChunkFragment: &ev.Chunk{Payload: &ev.Chunk_Data{Data: piece}}}
			if seq == 0 {
				f.ChunkFragment.Metadata = meta
			}
			e.frags = append(e.frags, f)
		}
		if err := e.st.produce(n, meta, c.GetData()); err != nil {
			return nil, err
		}
	}
	e.st.finish(n)
	return n, nil
}

// roleWire is the role sent for a canonical role: "assistant" is "model",
// an unset role is "user" (the spec requires one on the wire).
func roleWire(r string) string {
	switch r {
	case "assistant":
		return "model"
	case "":
		return "user"
	}
	return r
}

// base64Decode reads standard or URL-safe base64, padded or not.
func base64Decode(s string) ([]byte, error) {
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		var b []byte
		if b, err = enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("not base64: %w", err)
}
