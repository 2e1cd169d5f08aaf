package evergreen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/canonical"
	ev "github.com/interlingua-dev/interlingua/gen/evergreen/v2"
)

const (
	tp  = "text/plain"
	eot = "application/x-protobuf; type=EndOfTurn"
)

// storeRuleCase is one case of TestStoreRules: fragments applied in
// order, and either root's content or the abort they end in.
type storeRuleCase struct {
	name     string
	lenient  bool
	lim      Limits
	frags    []*ev.NodeFragment
	root     string
	want     string // flattened content of root
	complete bool   // root complete
	code     canonical.Code
	msg      string // substring of the abort message
}

// storeRuleCases cover every assembly rule of the reference (sections
// 3.3-3.7 and 7) and the Interlingua choices for the cases it leaves open.
var storeRuleCases = []storeRuleCase{
	{name: "single fragment leaf", frags: []*ev.NodeFragment{L("a", 0, false, "hi", tp)},
		root: "a", want: "user text/plain hi", complete: true},
	{name: "leaf in seq order", frags: []*ev.NodeFragment{L("a", 0, true, "ab", tp), L("a", 1, true, "cd"), L("a", 2, false, "e")},
		root: "a", want: "user text/plain abcde", complete: true},
	{name: "leaf out of order", frags: []*ev.NodeFragment{L("a", 2, false, "e"), L("a", 0, true, "ab", tp), L("a", 1, true, "cd")},
		root: "a", want: "user text/plain abcde", complete: true},
	{name: "gap keeps node incomplete", frags: []*ev.NodeFragment{L("a", 0, true, "ab", tp), L("a", 2, false, "e")},
		root: "a", want: "user text/plain ab", complete: false},
	{name: "duplicate seq keeps the first, silently", frags: []*ev.NodeFragment{L("a", 0, true, "ab", tp), L("a", 0, true, "XX", tp), L("a", 1, false, "c"), L("a", 1, false, "Y")},
		root: "a", want: "user text/plain abc", complete: true},
	{name: "duplicate of a held fragment", frags: []*ev.NodeFragment{L("a", 1, false, "c"), L("a", 1, false, "Y"), L("a", 0, true, "ab", tp)},
		root: "a", want: "user text/plain abc", complete: true},
	{name: "seq past the final aborts", frags: []*ev.NodeFragment{L("a", 0, false, "ab", tp), L("a", 1, false, "c")},
		code: canonical.CodeInvalidArgument, msg: `node "a": fragment seq 1 arrived after the final fragment seq 0`},
	{name: "seq past a held final aborts", frags: []*ev.NodeFragment{L("a", 1, false, "c"), L("a", 2, true, "d")},
		code: canonical.CodeInvalidArgument, msg: "after the final fragment seq 1"},
	{name: "second final with another seq aborts", frags: []*ev.NodeFragment{L("a", 2, false, "c"), L("a", 1, false, "d")},
		code: canonical.CodeInvalidArgument, msg: `node "a": second final fragment: seq 1 after final seq 2`},
	{name: "final below a received seq aborts", frags: []*ev.NodeFragment{L("a", 3, true, "c"), L("a", 1, false, "d")},
		code: canonical.CodeInvalidArgument, msg: "final fragment seq 1, but seq 3 was received"},
	{name: "negative seq aborts", frags: []*ev.NodeFragment{L("a", -1, false, "c")},
		code: canonical.CodeInvalidArgument, msg: "seq -1 is negative"},
	{name: "empty id aborts", frags: []*ev.NodeFragment{L("", 0, false, "c")},
		code: canonical.CodeInvalidArgument, msg: "id is empty"},
	{name: "child_ids and chunk in one fragment abort",
		frags: []*ev.NodeFragment{{Id: "a", ChildIds: []string{"b"}, ChunkFragment: &ev.Chunk{}}},
		code:  canonical.CodeInvalidArgument, msg: "both child_ids and chunk_fragment"},
	{name: "chunk after child_ids aborts", frags: []*ev.NodeFragment{P("a", 0, true, "b"), L("a", 1, false, "x")},
		code: canonical.CodeInvalidArgument, msg: "chunk_fragment on a non-leaf node"},
	{name: "child_ids after chunk aborts", frags: []*ev.NodeFragment{L("a", 0, true, "x", tp), P("a", 1, false, "b")},
		code: canonical.CodeInvalidArgument, msg: "child_ids on a leaf node"},
	{name: "kind fixed by the first fragment to arrive, whatever its seq",
		frags: []*ev.NodeFragment{P("a", 1, false, "b"), L("a", 0, true, "x", tp)},
		code:  canonical.CodeInvalidArgument, msg: "chunk_fragment on a non-leaf node"},
	{name: "equal metadata on seq > 0 is accepted (README example)",
		frags: []*ev.NodeFragment{R("v", 0, true, "https://x/part1", "video/mp4"), R("v", 1, false, "https://x/part2", "video/mp4")},
		root:  "v", want: "user video/mp4 @https://x/part1 | user video/mp4 @https://x/part2", complete: true},
	{name: "differing metadata on seq > 0 aborts on gRPC",
		frags: []*ev.NodeFragment{L("a", 0, true, "x", tp), L("a", 1, false, "y", "image/png")},
		code:  canonical.CodeInvalidArgument, msg: `node "a" seq 1: metadata differs from seq 0`},
	{name: "metadata on seq > 0 after none on seq 0 aborts on gRPC",
		frags: []*ev.NodeFragment{L("a", 0, true, "x"), L("a", 1, false, "y", tp)},
		code:  canonical.CodeInvalidArgument, msg: "metadata differs from seq 0"},
	{name: "differing metadata starts a chunk on WebSocket", lenient: true,
		frags: []*ev.NodeFragment{L("a", 0, true, "x", tp, "user"), L("a", 1, true, "y", tp, "user"), L("a", 2, true, "PNG", "image/png", "user"), E("a", 3, false)},
		root:  "a", want: "user text/plain xy | user image/png PNG", complete: true},
	{name: "no metadata on seq 0 is octet-stream", frags: []*ev.NodeFragment{L("a", 0, false, "x")},
		root: "a", want: "user application/octet-stream x", complete: true},
	{name: "ref and data in one leaf abort", frags: []*ev.NodeFragment{R("a", 0, true, "https://x/1", tp), L("a", 1, false, "y")},
		code: canonical.CodeInvalidArgument, msg: "mixes ref and data"},
	{name: "empty final fragment closes a leaf (actionengine-ts)", frags: []*ev.NodeFragment{L("a", 0, true, "x", tp), E("a", 1, false)},
		root: "a", want: "user text/plain x", complete: true},
	{name: "empty node", frags: []*ev.NodeFragment{E("a", 0, false)},
		root: "a", want: "<none>", complete: true},
	{name: "EndOfTurn leaf", frags: []*ev.NodeFragment{P("p", 0, false, "t", "e"), L("t", 0, false, "hi", tp), M("e", 0, false, eot)},
		root: "p", want: "user text/plain hi | user application/x-protobuf; type=EndOfTurn <no payload>", complete: true},
	{name: "children after the parent", frags: []*ev.NodeFragment{P("p", 0, false, "a", "b"), L("b", 0, false, "B", tp), L("a", 0, false, "A", tp)},
		root: "p", want: "user text/plain A | user text/plain B", complete: true},
	{name: "children before the parent", frags: []*ev.NodeFragment{L("b", 0, false, "B", tp), L("a", 0, false, "A", tp), P("p", 0, false, "a", "b")},
		root: "p", want: "user text/plain A | user text/plain B", complete: true},
	{name: "late-bound child keeps the parent incomplete", frags: []*ev.NodeFragment{P("p", 0, false, "a", "b"), L("a", 0, false, "A", tp)},
		root: "p", want: "user text/plain A", complete: false},
	{name: "streamed chain (README)", frags: []*ev.NodeFragment{P("p", 0, true, "t"), L("t", 0, false, "T", tp), P("p", 1, false, "e"), M("e", 0, false, eot)},
		root: "p", want: "user text/plain T | user application/x-protobuf; type=EndOfTurn <no payload>", complete: true},
	{name: "children across fragments, out of order", frags: []*ev.NodeFragment{P("p", 1, false, "b"), L("b", 0, false, "B", tp), P("p", 0, true, "a"), L("a", 0, false, "A", tp)},
		root: "p", want: "user text/plain A | user text/plain B", complete: true},
	{name: "shared node flattened once per use", frags: []*ev.NodeFragment{P("p", 0, false, "a", "q", "a"), P("q", 0, false, "a"), L("a", 0, false, "A", tp)},
		root: "p", want: "user text/plain A | user text/plain A | user text/plain A", complete: true},
	{name: "roles map: model is assistant, empty is user", frags: []*ev.NodeFragment{P("p", 0, false, "a", "b", "c"), L("a", 0, false, "A", tp), L("b", 0, false, "B", tp, "model"), L("c", 0, false, "C", tp, "system")},
		root: "p", want: "user text/plain A | assistant text/plain B | system text/plain C", complete: true},
	{name: "self cycle aborts", frags: []*ev.NodeFragment{P("a", 0, false, "a")},
		code: canonical.CodeInvalidArgument, msg: `cycle: node "a" lists itself`},
	{name: "cycle closed late aborts naming the nodes", frags: []*ev.NodeFragment{P("a", 0, false, "b"), P("b", 0, false, "c"), P("c", 0, false, "a")},
		code: canonical.CodeInvalidArgument, msg: `cycle: node "c" lists child "a", which leads back to it ("c" → "a" → "b" → "c")`},
	{name: "cycle through a streamed parent aborts", frags: []*ev.NodeFragment{P("a", 0, true, "b"), P("b", 0, false, "x"), P("a", 1, false, "y"), P("x", 0, false, "a")},
		code: canonical.CodeInvalidArgument, msg: `cycle: node "x" lists child "a"`},
	{name: "diamond is not a cycle", frags: []*ev.NodeFragment{P("a", 0, false, "b", "c"), P("b", 0, false, "d"), P("c", 0, false, "d"), L("d", 0, false, "D", tp)},
		root: "a", want: "user text/plain D | user text/plain D", complete: true},
	{name: "depth at the limit", lim: Limits{MaxDepth: 3}, frags: chain(4),
		root: "c0", want: "user text/plain leaf", complete: true},
	{name: "depth past the limit aborts naming the chain", lim: Limits{MaxDepth: 3}, frags: chain(5),
		code: canonical.CodeResourceExhausted, msg: `nests 4 levels deep, past the limit of 3 (max_depth): "c0" → "c1" → "c2" → "c3" → "c4"`},
	{name: "depth past the limit, built bottom up", lim: Limits{MaxDepth: 3}, frags: reversed(chain(5)),
		code: canonical.CodeResourceExhausted, msg: `past the limit of 3 (max_depth)`},
	{name: "node limit", lim: Limits{MaxNodes: 3}, frags: []*ev.NodeFragment{P("p", 0, false, "a", "b", "c")},
		code: canonical.CodeResourceExhausted, msg: `session holds 3 nodes, the limit (max_nodes); node "c" is one too many`},
	{name: "byte limit", lim: Limits{MaxBytes: 10}, frags: []*ev.NodeFragment{L("a", 0, true, "12345", tp), L("a", 1, false, "67890")},
		code: canonical.CodeResourceExhausted, msg: "more than 10 bytes of nodes (max_bytes)"},
	{name: "held fragments count against the byte limit", lim: Limits{MaxBytes: 200}, frags: []*ev.NodeFragment{L("a", 1, true, "x"), L("a", 2, true, "x"), L("a", 3, true, "x"), L("a", 4, true, "x")},
		code: canonical.CodeResourceExhausted, msg: "waiting for their predecessors"},
}

// TestStoreRules applies storeRuleCases.
func TestStoreRules(t *testing.T) {
	for _, tc := range storeRuleCases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(tc.lim, tc.lenient)
			var err error
			for _, f := range tc.frags {
				if err = st.apply(f); err != nil {
					break
				}
			}
			if tc.code != canonical.CodeOK {
				if codeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("got %v, want %s containing %q", err, tc.code, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := flat(t, st, tc.root); got != tc.want {
				t.Errorf("content\n got %s\nwant %s", got, tc.want)
			}
			if got := st.get(tc.root).complete; got != tc.complete {
				t.Errorf("complete = %v, want %v", got, tc.complete)
			}
			if st.bytes+st.held > st.lim.MaxBytes || len(st.nodes) > st.lim.MaxNodes {
				t.Errorf("limits exceeded: %d bytes, %d nodes", st.bytes+st.held, len(st.nodes))
			}
		})
	}
}

// chain is c0 -> c1 -> ... -> c(n-2) -> leaf c(n-1): n-1 edges.
func chain(n int) []*ev.NodeFragment {
	var out []*ev.NodeFragment
	for i := 0; i < n-1; i++ {
		out = append(out, P(fmt.Sprintf("c%d", i), 0, false, fmt.Sprintf("c%d", i+1)))
	}
	return append(out, L(fmt.Sprintf("c%d", n-1), 0, false, "leaf", tp))
}

func reversed(f []*ev.NodeFragment) []*ev.NodeFragment {
	out := make([]*ev.NodeFragment, len(f))
	for i, x := range f {
		out[len(f)-1-i] = x
	}
	return out
}

// TestStoreOwnNodes: the client may not write nodes the server writes,
// and may reuse them as children.
func TestStoreOwnNodes(t *testing.T) {
	st := newStore(Limits{}, false)
	counterIDs(st)
	out, err := st.reserve("r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.produce(out, &ev.ChunkMetadata{Mimetype: tp, Role: "model"}, []byte("answer")); err != nil {
		t.Fatal(err)
	}
	minted, _ := st.mint()
	for _, id := range []string{"r1", minted.id} {
		err := st.apply(L(id, 0, false, "x", tp))
		if codeOf(err) != canonical.CodeInvalidArgument || !strings.Contains(err.Error(), "written by the server") {
			t.Errorf("fragment for %q: got %v", id, err)
		}
	}
	if _, err := st.reserve("r1"); codeOf(err) != canonical.CodeInvalidArgument {
		t.Errorf("reserving r1 twice: %v", err)
	}
	if err := st.apply(P("p2", 0, false, "r1", "q")); err != nil {
		t.Fatal(err)
	}
	if err := st.apply(L("q", 0, false, "more?", tp)); err != nil {
		t.Fatal(err)
	}
	if st.get("p2").complete {
		t.Fatal("p2 complete before r1 is finished")
	}
	st.finish(out)
	if !st.get("p2").complete {
		t.Fatal("p2 not complete after r1 finished")
	}
	if got, want := flat(t, st, "p2"), "assistant text/plain answer | user text/plain more?"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestStoreGuard: an edge that would make an action's output part of its
// own input is refused, even when it arrives after the action.
func TestStoreGuard(t *testing.T) {
	st := newStore(Limits{}, false)
	if err := st.apply(P("p", 0, false, "x")); err != nil {
		t.Fatal(err)
	}
	out, _ := st.reserve("r")
	out.guard = st.get("p")
	err := st.apply(P("x", 0, false, "r"))
	if codeOf(err) != canonical.CodeInvalidArgument || !strings.Contains(err.Error(), `output of a pending action and cannot be part of that action's input "p"`) {
		t.Fatalf("got %v", err)
	}
}
