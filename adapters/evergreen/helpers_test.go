package evergreen

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (go test -update rewrites it)\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// Fragment constructors for tables.

func meta(m ...string) *ev.ChunkMetadata {
	if len(m) == 0 {
		return nil
	}
	md := &ev.ChunkMetadata{Mimetype: m[0]}
	if len(m) > 1 {
		md.Role = m[1]
	}
	return md
}

// L is a leaf fragment with data; m is mimetype[, role].
func L(id string, seq int32, cont bool, data string, m ...string) *ev.NodeFragment {
	return &ev.NodeFragment{Id: id, Seq: seq, Continued: cont,
		ChunkFragment: &ev.Chunk{Metadata: meta(m...), Payload: &ev.Chunk_Data{Data: []byte(data)}}}
}

// M is a leaf fragment with metadata and no payload (EndOfTurn).
func M(id string, seq int32, cont bool, m ...string) *ev.NodeFragment {
	return &ev.NodeFragment{Id: id, Seq: seq, Continued: cont, ChunkFragment: &ev.Chunk{Metadata: meta(m...)}}
}

// R is a leaf fragment with a ref.
func R(id string, seq int32, cont bool, ref string, m ...string) *ev.NodeFragment {
	return &ev.NodeFragment{Id: id, Seq: seq, Continued: cont,
		ChunkFragment: &ev.Chunk{Metadata: meta(m...), Payload: &ev.Chunk_Ref{Ref: ref}}}
}

// P is a non-leaf fragment listing children.
func P(id string, seq int32, cont bool, kids ...string) *ev.NodeFragment {
	return &ev.NodeFragment{Id: id, Seq: seq, Continued: cont, ChildIds: kids}
}

// E is a fragment with neither field.
func E(id string, seq int32, cont bool) *ev.NodeFragment {
	return &ev.NodeFragment{Id: id, Seq: seq, Continued: cont}
}

// counterIDs makes a store mint n1, n2, ...
func counterIDs(st *store) {
	i := 0
	st.newID = func() string { i++; return fmt.Sprintf("n%d", i) }
}

// flat returns the flattened content of node id: "role mime payload" per
// leaf, joined by " | "; "<none>" when it holds no chunk.
func flat(t testing.TB, st *store, id string) string {
	t.Helper()
	n := st.get(id)
	if n == nil {
		t.Fatalf("no node %q", id)
	}
	f := flattener{s: st, refs: newRefPolicy(nil), memo: map[*node]*canonical.Node{}, size: map[*node]expansion{}}
	c, err := f.node(n)
	if err != nil {
		t.Fatalf("flatten %q: %v", id, err)
	}
	return describe(c)
}

func describe(c *canonical.Node) string {
	if c == nil {
		return "<none>"
	}
	var parts []string
	for _, l := range canonical.Leaves(nil, c) {
		p := l.GetRole() + " " + l.GetMime() + " "
		switch {
		case l.GetRef() != "":
			p += "@" + l.GetRef()
		case l.GetPayload() == nil:
			p += "<no payload>"
		default:
			p += string(l.GetData())
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " | ")
}

// memSink is a renderer sink over a plain store that records clones of the
// messages sent.
type memSink struct {
	st   *store
	msgs []*ev.SessionMessage
	fail error
}

func (m *memSink) send(msg *ev.SessionMessage) error {
	if m.fail != nil {
		return m.fail
	}
	m.msgs = append(m.msgs, proto.Clone(msg).(*ev.SessionMessage))
	return nil
}
func (m *memSink) mint() (*node, error) { return m.st.mint() }
func (m *memSink) produce(n *node, md *ev.ChunkMetadata, d []byte) error {
	return m.st.produce(n, md, d)
}
func (m *memSink) produceRef(n *node, md *ev.ChunkMetadata, r string) error {
	return m.st.produceRef(n, md, r)
}
func (m *memSink) adopt(p, c *node) error { return m.st.adopt(p, c) }
func (m *memSink) finish(n *node) error   { m.st.finish(n); return nil }

// codeOf is the canonical code of err (OK for nil).
func codeOf(err error) canonical.Code { return canonical.CodeOf(err) }
