package evergreen

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
	ichunk "github.com/interlingua-dev/interlingua/internal/chunk"
)

// model is a random DAG of nodes: node 0 is the root; a parent's children
// have higher indexes (no cycles), and may repeat (sharing).
type model struct {
	leaf []bool
	data []string
	kids [][]int
}

func randomModel(r *rand.Rand) model {
	n := 2 + r.IntN(12)
	m := model{leaf: make([]bool, n), data: make([]string, n), kids: make([][]int, n)}
	for i := n - 1; i >= 0; i-- {
		if i == n-1 || (i > 0 && r.IntN(3) == 0) {
			m.leaf[i] = true
			m.data[i] = randomText(r)
			continue
		}
		for k := r.IntN(4); k >= 0; k-- {
			m.kids[i] = append(m.kids[i], i+1+r.IntN(n-1-i))
		}
	}
	return m
}

func randomText(r *rand.Rand) string {
	words := []string{"héllo ", "wörld ", "🙂", "a", "", "日本語 ", "x"}
	var sb strings.Builder
	for k := r.IntN(6); k > 0; k-- {
		sb.WriteString(words[r.IntN(len(words))])
	}
	return sb.String()
}

func (m model) want(i int, out []string) []string {
	if m.leaf[i] {
		return append(out, "user text/plain "+m.data[i])
	}
	for _, k := range m.kids[i] {
		out = m.want(k, out)
	}
	return out
}

// fragments cuts every node into random fragments: leaf bytes split at
// random points (runes too), seq 0 carrying the metadata and later
// fragments repeating it or not, child lists split into random groups,
// optional empty closing fragments.
func (m model) fragments(r *rand.Rand) []*ev.NodeFragment {
	var out []*ev.NodeFragment
	for i := range m.leaf {
		id := fmt.Sprintf("n%d", i)
		var frags []*ev.NodeFragment
		if m.leaf[i] {
			for j, piece := range ichunk.Split([]byte(m.data[i]), r.Uint64(), 1+r.IntN(4)) {
				f := &ev.NodeFragment{Id: id, ChunkFragment: &ev.Chunk{Payload: &ev.Chunk_Data{Data: piece}}}
				if j == 0 || r.IntN(2) == 0 {
					f.ChunkFragment.Metadata = &ev.ChunkMetadata{Mimetype: tp}
				}
				frags = append(frags, f)
			}
		} else {
			kids := m.kids[i]
			for len(kids) > 0 {
				k := 1 + r.IntN(len(kids))
				frags = append(frags, &ev.NodeFragment{Id: id, ChildIds: kids2ids(kids[:k])})
				kids = kids[k:]
			}
		}
		if r.IntN(3) == 0 || len(frags) == 0 {
			frags = append(frags, &ev.NodeFragment{Id: id})
		}
		for j, f := range frags {
			f.Seq, f.Continued = int32(j), j < len(frags)-1
		}
		out = append(out, frags...)
	}
	return out
}

func kids2ids(k []int) []string {
	out := make([]string, len(k))
	for i, x := range k {
		out[i] = fmt.Sprintf("n%d", x)
	}
	return out
}

// TestReassemblyProperty: any re-fragmentation and any delivery order of
// the same nodes, with duplicates, yields the same flattened content.
func TestReassemblyProperty(t *testing.T) {
	for seed := uint64(0); seed < 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		m := randomModel(r)
		want := strings.Join(m.want(0, nil), " | ")
		if want == "" {
			want = "<none>"
		}
		frags := m.fragments(r)
		for k := r.IntN(3); k > 0; k-- { // retransmissions
			frags = append(frags, proto.Clone(frags[r.IntN(len(frags))]).(*ev.NodeFragment))
		}
		r.Shuffle(len(frags), func(i, j int) { frags[i], frags[j] = frags[j], frags[i] })
		st := newStore(Limits{}, false)
		for _, f := range frags {
			if err := st.apply(f); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if !st.get("n0").complete {
			t.Fatalf("seed %d: root incomplete after every fragment", seed)
		}
		if got := flat(t, st, "n0"); got != want {
			t.Fatalf("seed %d:\n got %s\nwant %s", seed, got, want)
		}
	}
}

// harness drives a store and actions as a session does, without
// goroutines or transports.
type harness struct {
	st      *store
	pending []*generate
	runs    []string
	err     error
}

func newHarness() *harness {
	st := newStore(Limits{MaxDepth: 8, MaxNodes: 64, MaxBytes: 4096}, false)
	counterIDs(st)
	return &harness{st: st}
}

func (h *harness) handle(m *ev.SessionMessage) {
	if h.err != nil {
		return
	}
	for _, f := range m.GetNodeFragments() {
		if h.err = h.st.apply(f); h.err != nil {
			return
		}
	}
	for _, a := range m.GetActions() {
		g, err := parseAction(h.st, a, func(id string) (string, bool) { return "echo", id == "" || id == "echo" })
		if h.err = err; err != nil {
			return
		}
		h.pending = append(h.pending, g)
	}
	keep := h.pending[:0]
	for _, g := range h.pending {
		if !g.input.complete {
			keep = append(keep, g)
			continue
		}
		req, err := g.request(h.st, "t", newRefPolicy(nil))
		if h.err = err; err != nil {
			return
		}
		h.runs = append(h.runs, describe(req.GetInputs()[0].GetNode()))
	}
	h.pending = keep
}

// outcome summarizes a harness for comparison.
func (h *harness) outcome() string {
	return fmt.Sprintf("err=%v runs=%q pending=%d", h.err, h.runs, len(h.pending))
}

// settled is what no grouping of the items into messages may change: the
// abort, or else the runs started and the actions still waiting. An abort
// drops the session's nodes and cancels its runs, and runs start once a
// message's items are applied, so which runs started before an abort
// depends on where the messages split the items (a run whose input
// completes in the message that aborts never starts).
func (h *harness) settled() string {
	if h.err != nil {
		return fmt.Sprintf("err=%v", h.err)
	}
	return h.outcome()
}

// decodeSession reads length-prefixed SessionMessages; it stops at the
// first that does not decode.
func decodeSession(b []byte) []*ev.SessionMessage {
	var out []*ev.SessionMessage
	for len(b) > 0 && len(out) < 256 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			break
		}
		m := &ev.SessionMessage{}
		if proto.Unmarshal(b[k:k+int(n)], m) != nil {
			break
		}
		out = append(out, m)
		b = b[k+int(n):]
	}
	return out
}

func encodeSession(ms []*ev.SessionMessage) []byte {
	var b []byte
	for _, m := range ms {
		p, _ := proto.Marshal(m)
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// loadSessions reads testdata/sessions/*.jsonl: one proto3-JSON
// SessionMessage per line.
func loadSessions(t testing.TB) map[string][]*ev.SessionMessage {
	files, _ := filepath.Glob(filepath.Join("testdata", "sessions", "*.jsonl"))
	out := map[string][]*ev.SessionMessage{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var ms []*ev.SessionMessage
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 || line[0] == '#' {
				continue
			}
			m := &ev.SessionMessage{}
			if err := protojson.Unmarshal(line, m); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			ms = append(ms, m)
		}
		out[filepath.Base(file)] = ms
	}
	if len(out) == 0 {
		t.Fatal("no testdata/sessions/*.jsonl")
	}
	return out
}

// abortCodes are the codes the assembler and action rules may abort with.
var abortCodes = map[canonical.Code]bool{
	canonical.CodeInvalidArgument: true, canonical.CodeResourceExhausted: true,
	canonical.CodeNotFound: true, canonical.CodeUnimplemented: true,
}

// FuzzSession feeds arbitrary SessionMessage sequences to the assembler
// and action rules: no panic, memory within the limits, every abort with a
// table code and a message, and the same settled outcome however the
// items are grouped into messages.
func FuzzSession(f *testing.F) {
	for _, ms := range loadSessions(f) {
		f.Add(encodeSession(ms))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms := decodeSession(b)
		h := newHarness()
		for _, m := range ms {
			h.handle(m)
			if h.st.bytes+h.st.held > h.st.lim.MaxBytes || len(h.st.nodes) > h.st.lim.MaxNodes {
				t.Fatalf("store past its limits: %d bytes, %d nodes", h.st.bytes+h.st.held, len(h.st.nodes))
			}
		}
		if h.err != nil {
			ce := canonical.AsError(h.err)
			if !abortCodes[ce.Code] || ce.Message == "" {
				t.Fatalf("abort without a table code and a message: %v", h.err)
			}
		}
		// One item per message, in processing order.
		one := newHarness()
		for _, m := range ms {
			for _, fr := range m.GetNodeFragments() {
				one.handle(&ev.SessionMessage{NodeFragments: []*ev.NodeFragment{fr}})
			}
			for _, a := range m.GetActions() {
				one.handle(&ev.SessionMessage{Actions: []*ev.Action{a}})
			}
		}
		if a, b := h.settled(), one.settled(); a != b {
			t.Fatalf("grouping changed the outcome:\n%s\n%s", a, b)
		}
	})
}

// TestSessionSeeds runs the fuzz seeds as ordinary tests with their
// expected outcomes, so they fail if behaviour drifts.
func TestSessionSeeds(t *testing.T) {
	var sb strings.Builder
	sessions := loadSessions(t)
	names := make([]string, 0, len(sessions))
	for n := range sessions {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		h := newHarness()
		for _, m := range sessions[name] {
			h.handle(m)
		}
		fmt.Fprintf(&sb, "%s: %s\n", name, h.outcome())
	}
	golden(t, "sessions.golden", sb.String())
}
