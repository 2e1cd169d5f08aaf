package agent

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// runStartWant is run.start as a tree of maps, built from the request
// apart from runStart's structs: what the command must hold.
func runStartWant(req *canonical.Request, assistant string) any {
	var input any
	if in, ok := req.GetExtensions()["agent.input"]; ok {
		input = wantValue(in)
	} else {
		var msgs []any
		for _, in := range req.GetInputs() {
			for _, leaf := range canonical.Leaves(nil, in.GetNode()) {
				if !canonical.IsText(leaf) {
					continue
				}
				role := leaf.GetRole()
				if role == "" {
					role = "user"
				}
				msgs = append(msgs, map[string]any{"role": role, "content": string(leaf.GetData())})
			}
		}
		input = map[string]any{"messages": msgs} // null without text: what the backend always sent
	}
	params := map[string]any{"assistant_id": assistant, "input": input}
	if c, ok := req.GetExtensions()["agent.config"]; ok {
		params["config"] = wantValue(c)
	} else if len(req.GetParameters()) > 0 {
		params["config"] = map[string]any{"configurable": wantValue(structpb.NewStructValue(&structpb.Struct{Fields: req.GetParameters()}))}
	}
	if m, ok := req.GetExtensions()["agent.metadata"]; ok {
		params["metadata"] = wantValue(m)
	} else if len(req.GetMetadata()) > 0 {
		md := map[string]any{}
		for k, v := range req.GetMetadata() {
			md[k] = v
		}
		params["metadata"] = md
	}
	return map[string]any{"id": 2, "method": "run.start", "params": params}
}

// wantValue is v as a Go value, NaN and infinities (which JSON lacks) nil.
func wantValue(v *structpb.Value) any {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return nil
		}
	case *structpb.Value_StructValue:
		m := map[string]any{}
		for name, f := range k.StructValue.GetFields() {
			m[name] = wantValue(f)
		}
		return m
	case *structpb.Value_ListValue:
		l := []any{}
		for _, e := range k.ListValue.GetValues() {
			l = append(l, wantValue(e))
		}
		return l
	}
	return v.AsInterface()
}

// sameJSON reports whether got holds the same JSON as want (a Go value),
// member order and spelling aside; invalid UTF-8 is U+FFFD in both, and
// of two keys it makes equal the last in sorted order stands.
func sameJSON(t *testing.T, got []byte, want any) bool {
	t.Helper()
	opts := json.JoinOptions(wireJSON, json.FormatNilSliceAsNull(true))
	wb, err := json.Marshal(want, opts)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g, peerJSON); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal(wb, &w, peerJSON); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(g, w)
}

// commandStrings are the strings whose escaping differs between the
// encoders: HTML characters, U+2028, \b and \f, other controls, invalid
// UTF-8, quotes and backslashes.
var commandStrings = []string{"", "hello", "a<b>&c", "line\u2028sep\u2029", "\b\f\n\t\x01\x1f", "bad\xff\xfe", `q"\`, "日本語 😀", "</script>"}

func (g *commandGen) str() string {
	if g.r.IntN(2) == 0 {
		return commandStrings[g.r.IntN(len(commandStrings))]
	}
	b := make([]byte, g.r.IntN(12))
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	return string(b)
}

type commandGen struct{ r *rand.Rand }

func (g *commandGen) value(depth int) *structpb.Value {
	switch n := g.r.IntN(7); {
	case n == 0:
		return structpb.NewStringValue(g.str())
	case n == 1:
		return structpb.NewNumberValue([]float64{0, -1.5, 1e21, 1e-7, math.NaN(), math.Inf(1), 12345}[g.r.IntN(7)])
	case n == 2:
		return structpb.NewBoolValue(g.r.IntN(2) == 0)
	case n == 3:
		return structpb.NewNullValue()
	case n == 4 && depth < 3:
		var l []*structpb.Value
		for range g.r.IntN(4) {
			l = append(l, g.value(depth+1))
		}
		return structpb.NewListValue(&structpb.ListValue{Values: l})
	case depth < 3:
		return structpb.NewStructValue(&structpb.Struct{Fields: g.fields(depth + 1)})
	}
	return &structpb.Value{} // no kind: null
}

func (g *commandGen) fields(depth int) map[string]*structpb.Value {
	m := map[string]*structpb.Value{}
	for range g.r.IntN(4) {
		// Keys valid UTF-8: two keys U+FFFD makes equal would be a
		// repeated name, which the comparison cannot order.
		m[strings.ToValidUTF8(g.str(), "?")] = g.value(depth)
	}
	return m
}

func (g *commandGen) request() *canonical.Request {
	req := &canonical.Request{Extensions: map[string]*structpb.Value{}}
	for range g.r.IntN(3) {
		n := canonical.TextNode([]string{"", "user", "ai", g.str()}[g.r.IntN(4)], g.str())
		if g.r.IntN(4) == 0 { // a tree, an image leaf among its text
			n = &canonical.Node{Children: []*canonical.Node{n, {Mime: "image/png", Payload: n.GetPayload()}, canonical.TextNode("", g.str())}}
		}
		req.Inputs = append(req.Inputs, &canonical.NamedNode{Name: "messages", Node: n})
	}
	if g.r.IntN(3) == 0 {
		req.Extensions["agent.input"] = g.value(0)
	}
	switch g.r.IntN(3) {
	case 0:
		req.Extensions["agent.config"] = g.value(0)
	case 1:
		req.Parameters = g.fields(0)
	}
	switch g.r.IntN(3) {
	case 0:
		req.Extensions["agent.metadata"] = g.value(0)
	case 1:
		req.Metadata = map[string]string{}
		for range 1 + g.r.IntN(3) {
			req.Metadata[strings.ToValidUTF8(g.str(), "?")] = g.str()
		}
	}
	return req
}

// TestRunStartCommand: command1 writes run.start with the assistant,
// input, config and metadata of requests with every kind of each, and
// strings that need escaping (and invalid UTF-8).
func TestRunStartCommand(t *testing.T) {
	g := &commandGen{r: rand.New(rand.NewPCG(1, 2))}
	for i := range 3000 {
		req, assistant := g.request(), g.str()
		if assistant == "" {
			assistant = "agent"
		}
		got, err := command1(req, assistant)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, got, runStartWant(req, assistant)) {
			t.Fatalf("request %d (%v):\n got %s", i, req, got)
		}
	}
}

func BenchmarkRunStart(b *testing.B) {
	req := &canonical.Request{
		Inputs:     []*canonical.NamedNode{{Name: "messages", Node: canonical.TextNode("user", "What is the weather in Paris today?")}},
		Extensions: map[string]*structpb.Value{"agent.config": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"recursion_limit": structpb.NewNumberValue(25)}})},
		Metadata:   map[string]string{"user": "u-1"},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := command1(req, "agent"); err != nil {
			b.Fatal(err)
		}
	}
}
