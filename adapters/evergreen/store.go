package evergreen

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
)

// The node store assembles one session's nodes from their fragments: the
// receiver algorithm of section 7 of the reference. Every node stays until
// the session ends. A store is not safe for concurrent use; the session
// that owns it serializes access.

// kind is a node's kind, fixed by the first fragment that carries
// child_ids or chunk_fragment.
type kind uint8

const (
	kindUnknown kind = iota // no fragment with content yet (placeholder or empty node)
	kindLeaf
	kindParent
)

// payload is the kind of a leaf's payloads; a leaf may not mix them.
type payload uint8

const (
	payloadNone payload = iota
	payloadData
	payloadRef
)

// heldOverhead is what a fragment waiting for its predecessors costs
// against Limits.MaxBytes on top of its payload and its id (each decoded
// fragment has its own copy): the decoded NodeFragment, its Chunk and
// payload wrapper, the payload's allocation and the map entry. Measured by
// TestHeldFragmentsHeapBound: 276 bytes for a one-byte fragment with a
// 37-byte id (64 were charged, and a peer's out-of-order one-byte
// fragments grew the heap to 4.6 times max_bytes).
const heldOverhead = 256

// node is one node of the session.
type node struct {
	id   string
	kind kind
	// ours is set on nodes this side writes: requested outputs, minted
	// children and (backend) the inputs we sent. The peer may not send
	// fragments for them.
	ours bool
	// final is the seq of the final fragment, -1 until it is known.
	final int32
	// next is the lowest seq not yet released; maxSeq the highest received.
	next, maxSeq int32
	// held are received fragments waiting for a lower seq, by seq.
	held map[int32]*ev.NodeFragment
	pay  payload
	// chunks are a leaf's chunks: one, or (lenient transport) one per run
	// of fragments with equal metadata.
	chunks []chunk
	// children are a non-leaf's released children in order.
	children []*node
	// parents lists, while the node is incomplete, the parent of each child
	// slot that waits on it (a parent listing it twice appears twice).
	parents []*node
	// waiting counts child slots whose child is not complete.
	waiting int
	// height is the longest chain of child edges below the node.
	height int
	// done: every fragment 0..final released. complete: done, and every
	// child complete.
	done, complete bool
	// order is the store's arrival counter when the node's first fragment
	// was released (0: none yet); it orders parts across outputs.
	order uint64
	// guard is the input root of a pending action that has this node as
	// an output: an edge that puts the node into that input is refused.
	guard *node
	mark  uint32
}

// chunk is one chunk of a leaf: its metadata and payload so far.
type chunk struct {
	meta *ev.ChunkMetadata
	data []byte
	refs []string
}

// store holds a session's nodes.
type store struct {
	lim Limits
	// lenient reads differing metadata on seq > 0 as the start of a new
	// chunk (the WebSocket/JSON transport) instead of aborting.
	lenient bool
	nodes   map[string]*node
	bytes   int64
	held    int64
	arrived uint64
	stamp   uint32
	// newID mints node ids (random UUIDv4 by default).
	newID func() string
}

func newStore(lim Limits, lenient bool) *store {
	return &store{lim: lim.withDefaults(), lenient: lenient, nodes: map[string]*node{}, newID: uuid4}
}

// uuid4 returns a random RFC 4122 version 4 UUID.
func uuid4() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

func invalid(format string, args ...any) *canonical.Error {
	return canonical.Errorf(canonical.CodeInvalidArgument, format, args...)
}

// get returns the node with id, or nil.
func (s *store) get(id string) *node { return s.nodes[id] }

// node returns the node with id, creating a placeholder if it is new.
func (s *store) node(id string) (*node, error) {
	if n := s.nodes[id]; n != nil {
		return n, nil
	}
	if len(s.nodes) >= s.lim.MaxNodes {
		return nil, canonical.Errorf(canonical.CodeResourceExhausted,
			"session holds %d nodes, the limit (max_nodes); node %q is one too many", s.lim.MaxNodes, id)
	}
	if err := s.charge(int64(len(id))); err != nil {
		return nil, err
	}
	n := &node{id: id, final: -1, maxSeq: -1}
	s.nodes[id] = n
	return n, nil
}

// charge counts n payload bytes against Limits.MaxBytes.
func (s *store) charge(n int64) error {
	if s.bytes+s.held+n > s.lim.MaxBytes {
		return canonical.Errorf(canonical.CodeResourceExhausted,
			"session would hold more than %d bytes of nodes (max_bytes)", s.lim.MaxBytes)
	}
	s.bytes += n
	return nil
}

// apply takes one fragment from the peer. It drops duplicates silently and
// returns an *canonical.Error naming the node and rule for a violation,
// after which the session must abort.
func (s *store) apply(f *ev.NodeFragment) error {
	id, seq := f.GetId(), f.GetSeq()
	if id == "" {
		return invalid("node_fragments: id is empty")
	}
	if seq < 0 {
		return invalid("node %q: seq %d is negative", id, seq)
	}
	hasKids, ch := len(f.GetChildIds()) > 0, f.GetChunkFragment()
	if hasKids && ch != nil {
		return invalid("node %q seq %d: a fragment carries both child_ids and chunk_fragment", id, seq)
	}
	n, err := s.node(id)
	if err != nil {
		return err
	}
	if n.ours {
		return invalid("node %q is written by the server (an action output or a server-minted id); the client may not send fragments for it", id)
	}
	if seq < n.next || n.held[seq] != nil {
		return nil // duplicate (id, seq): the first one received wins
	}
	if n.final >= 0 && seq > n.final {
		return invalid("node %q: fragment seq %d arrived after the final fragment seq %d", id, seq, n.final)
	}
	if !f.GetContinued() {
		if n.final >= 0 {
			return invalid("node %q: second final fragment: seq %d after final seq %d", id, seq, n.final)
		}
		if n.maxSeq > seq {
			return invalid("node %q: final fragment seq %d, but seq %d was received", id, seq, n.maxSeq)
		}
	}
	switch {
	case hasKids && n.kind == kindLeaf:
		return invalid("node %q seq %d: child_ids on a leaf node (its kind was fixed by an earlier chunk_fragment)", id, seq)
	case ch != nil && n.kind == kindParent:
		return invalid("node %q seq %d: chunk_fragment on a non-leaf node (its kind was fixed by earlier child_ids)", id, seq)
	case hasKids:
		n.kind = kindParent
	case ch != nil:
		n.kind = kindLeaf
	}
	if ch != nil {
		switch ch.GetPayload().(type) {
		case *ev.Chunk_Data:
			if n.pay == payloadRef {
				return invalid("node %q seq %d: a leaf mixes ref and data payloads", id, seq)
			}
			n.pay = payloadData
		case *ev.Chunk_Ref:
			if n.pay == payloadData {
				return invalid("node %q seq %d: a leaf mixes ref and data payloads", id, seq)
			}
			n.pay = payloadRef
		}
	}
	cost := int64(len(ch.GetData())) + int64(len(ch.GetRef()))
	for _, c := range f.GetChildIds() {
		cost += int64(len(c))
	}
	if ch.GetMetadata() != nil {
		cost += int64(proto.Size(ch.GetMetadata()))
	}
	if err := s.charge(cost); err != nil {
		return err
	}
	if seq > n.maxSeq {
		n.maxSeq = seq
	}
	if !f.GetContinued() {
		n.final = seq
	}
	if seq != n.next {
		return s.hold(n, f)
	}
	return s.releaseFrom(n, f)
}

// hold keeps f, which waits for lower seqs of n, charging what it costs.
func (s *store) hold(n *node, f *ev.NodeFragment) error {
	hold := heldOverhead + int64(len(f.GetId()))
	if s.bytes+s.held+hold > s.lim.MaxBytes {
		return canonical.Errorf(canonical.CodeResourceExhausted,
			"session would hold more than %d bytes of nodes (max_bytes) with fragments waiting for their predecessors", s.lim.MaxBytes)
	}
	if n.held == nil {
		n.held = map[int32]*ev.NodeFragment{}
	}
	n.held[f.GetSeq()] = f
	s.held += hold
	return nil
}

// releaseFrom releases f, n's next fragment, and the held ones it frees.
func (s *store) releaseFrom(n *node, f *ev.NodeFragment) error {
	if err := s.release(n, f); err != nil {
		return err
	}
	for len(n.held) > 0 {
		g := n.held[n.next]
		if g == nil {
			break
		}
		delete(n.held, n.next)
		s.held -= heldOverhead + int64(len(g.GetId()))
		if err := s.release(n, g); err != nil {
			return err
		}
	}
	if len(n.held) == 0 {
		n.held = nil
	}
	if n.final >= 0 && n.next > n.final {
		n.done = true
		s.settle(n)
	}
	return nil
}

// release applies the fragment with seq n.next.
func (s *store) release(n *node, f *ev.NodeFragment) error {
	seq := n.next
	n.next++
	if n.order == 0 {
		s.arrived++
		n.order = s.arrived
	}
	if ch := f.GetChunkFragment(); ch != nil {
		meta := ch.GetMetadata()
		switch {
		case len(n.chunks) == 0:
			if seq != 0 && meta != nil && !s.lenient {
				return invalid("node %q seq %d: metadata on a fragment other than seq 0 (seq 0 carried none)", n.id, seq)
			}
			n.chunks = append(n.chunks, chunk{meta: meta})
		case meta != nil && !metaEqual(meta, n.chunks[len(n.chunks)-1].meta):
			if !s.lenient {
				return invalid("node %q seq %d: metadata differs from seq 0 (only seq 0 may carry metadata)", n.id, seq)
			}
			n.chunks = append(n.chunks, chunk{meta: meta})
		}
		c := &n.chunks[len(n.chunks)-1]
		switch p := ch.GetPayload().(type) {
		case *ev.Chunk_Data:
			c.data = appendData(c.data, p.Data)
		case *ev.Chunk_Ref:
			c.refs = append(c.refs, p.Ref)
		}
		return nil
	}
	for _, cid := range f.GetChildIds() {
		c, err := s.node(cid)
		if err != nil {
			return err
		}
		if err := s.link(n, c); err != nil {
			return err
		}
	}
	return nil
}

// appendData appends p to data; the first payload is kept without a copy
// (capped, so a later append copies rather than writes into it).
func appendData(data, p []byte) []byte {
	if data == nil {
		return p[:len(p):len(p)]
	}
	return append(data, p...)
}

// metaEqual compares chunk metadata, nil reading as empty.
func metaEqual(a, b *ev.ChunkMetadata) bool {
	if a == nil {
		a = &ev.ChunkMetadata{}
	}
	if b == nil {
		b = &ev.ChunkMetadata{}
	}
	return proto.Equal(a, b)
}

// link adds the edge p -> c, refusing cycles and nesting past MaxDepth.
func (s *store) link(p, c *node) error {
	if c == p {
		return invalid("cycle: node %q lists itself as a child", p.id)
	}
	if c.height > p.height {
		if path := s.path(c, p); path != nil {
			return invalid("cycle: node %q lists child %q, which leads back to it (%s)", p.id, c.id, joinPath(append([]*node{p}, path...)))
		}
	}
	if g := c.guard; g != nil && (g == p || s.path(g, p) != nil) {
		return invalid("node %q is an output of a pending action and cannot be part of that action's input %q (via %q)", c.id, g.id, p.id)
	}
	p.children = append(p.children, c)
	if !c.complete {
		c.parents = append(c.parents, p)
		p.waiting++
	}
	if c.height+1 > p.height {
		return s.raise(p, c.height+1)
	}
	return nil
}

// path returns the chain of nodes from `from` to `to` (both included) by
// known edges, or nil. A node reaches `to` only if it is taller, and a
// complete node reaches no incomplete one, which prunes the search.
func (s *store) path(from, to *node) []*node {
	s.stamp++
	return s.walk(from, to, s.stamp)
}

func (s *store) walk(x, to *node, stamp uint32) []*node {
	if x == to {
		return []*node{x}
	}
	if x.mark == stamp || x.height <= to.height || (x.complete && !to.complete) {
		return nil
	}
	x.mark = stamp
	for _, c := range x.children {
		if p := s.walk(c, to, stamp); p != nil {
			return append([]*node{x}, p...)
		}
	}
	return nil
}

// raise sets n's height to h and lifts its waiting ancestors, refusing any
// past MaxDepth. Only incomplete nodes gain edges below them, and every
// incomplete node's parents are in its parents list, so this is exact.
func (s *store) raise(n *node, h int) error {
	n.height = h
	work := []*node{n}
	for len(work) > 0 {
		x := work[len(work)-1]
		work = work[:len(work)-1]
		if x.height > s.lim.MaxDepth {
			return canonical.Errorf(canonical.CodeResourceExhausted, "node %q nests %d levels deep, past the limit of %d (max_depth): %s",
				x.id, x.height, s.lim.MaxDepth, joinPath(s.deepest(x)))
		}
		for _, q := range x.parents {
			if x.height+1 > q.height {
				q.height = x.height + 1
				work = append(work, q)
			}
		}
	}
	return nil
}

// deepest returns the longest chain below n.
func (s *store) deepest(n *node) []*node {
	out := []*node{n}
	for n.height > 0 {
		next := n
		for _, c := range n.children {
			if c.height == n.height-1 {
				next = c
				break
			}
		}
		if next == n {
			break
		}
		n = next
		out = append(out, n)
	}
	return out
}

// joinPath names a chain of nodes, eliding the middle of long ones.
func joinPath(p []*node) string {
	ids := make([]string, 0, 9)
	for i, n := range p {
		if len(p) > 8 && i == 4 {
			ids = append(ids, "…")
		}
		if len(p) > 8 && i >= 4 && i < len(p)-3 {
			continue
		}
		ids = append(ids, `"`+n.id+`"`)
	}
	return strings.Join(ids, " → ")
}

// settle marks n complete if it is done and no child waits, and completes
// the parents that were waiting only on it.
func (s *store) settle(n *node) {
	if n.complete || !n.done || n.waiting > 0 {
		return
	}
	work := []*node{n}
	for len(work) > 0 {
		x := work[len(work)-1]
		work = work[:len(work)-1]
		x.complete = true
		for _, q := range x.parents {
			q.waiting--
			if q.done && q.waiting == 0 && !q.complete {
				work = append(work, q)
			}
		}
		x.parents = nil
	}
}

// Nodes this side writes.

// mint returns a new node of ours with a fresh random id.
func (s *store) mint() (*node, error) {
	for {
		id := s.newID()
		if s.nodes[id] != nil {
			continue
		}
		n, err := s.node(id)
		if err != nil {
			return nil, err
		}
		n.ours = true
		return n, nil
	}
}

// reserve makes id an output node of ours. It must be new: unknown, or
// referenced as a child but never sent.
func (s *store) reserve(id string) (*node, error) {
	if n := s.nodes[id]; n != nil && (n.ours || n.maxSeq >= 0) {
		return nil, invalid("output id %q is already used in the session (output ids must be new)", id)
	}
	n, err := s.node(id)
	if err != nil {
		return nil, err
	}
	n.ours = true
	return n, nil
}

// produce appends data to a leaf of ours, setting its metadata first.
func (s *store) produce(n *node, meta *ev.ChunkMetadata, data []byte) error {
	if err := s.charge(int64(len(data))); err != nil {
		return err
	}
	if n.kind == kindUnknown {
		n.kind = kindLeaf
		n.chunks = append(n.chunks, chunk{meta: meta})
		s.arrived++
		n.order = s.arrived
	}
	c := &n.chunks[len(n.chunks)-1]
	if len(data) > 0 {
		c.data = append(c.data, data...)
	}
	return nil
}

// produceRef sets a leaf of ours to a ref.
func (s *store) produceRef(n *node, meta *ev.ChunkMetadata, ref string) error {
	if err := s.produce(n, meta, nil); err != nil {
		return err
	}
	if err := s.charge(int64(len(ref))); err != nil {
		return err
	}
	n.pay = payloadRef
	c := &n.chunks[len(n.chunks)-1]
	c.refs = append(c.refs, ref)
	return nil
}

// adopt appends child c to a non-leaf of ours.
func (s *store) adopt(p, c *node) error {
	if err := s.charge(int64(len(c.id))); err != nil {
		return err
	}
	if p.kind == kindUnknown {
		p.kind = kindParent
		s.arrived++
		p.order = s.arrived
	}
	return s.link(p, c)
}

// finish marks a node of ours done.
func (s *store) finish(n *node) {
	if n.done {
		return
	}
	n.done = true
	s.settle(n)
}
