package agent

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/canonical"
)

// runStartMarshal is run.start as json.Marshal makes it of maps: the
// reference runStart's bytes are held to.
func runStartMarshal(req *canonical.Request, assistant string) ([]byte, error) {
	var input json.RawMessage
	if in, ok := req.GetExtensions()["agent.input"]; ok {
		input = appendValue(nil, in)
	} else {
		var msgs []map[string]string
		for _, in := range req.GetInputs() {
			for _, leaf := range canonical.Leaves(nil, in.GetNode()) {
				if !canonical.IsText(leaf) {
					continue
				}
				role := leaf.GetRole()
				if role == "" {
					role = "user"
				}
				msgs = append(msgs, map[string]string{"role": role, "content": string(leaf.GetData())})
			}
		}
		input, _ = json.Marshal(map[string]any{"messages": msgs})
	}
	params := map[string]any{"assistant_id": assistant, "input": input}
	if c, ok := req.GetExtensions()["agent.config"]; ok {
		params["config"] = json.RawMessage(appendValue(nil, c))
	} else if len(req.GetParameters()) > 0 {
		params["config"] = map[string]any{"configurable": json.RawMessage(appendFields(nil, req.GetParameters(), false))}
	}
	if m, ok := req.GetExtensions()["agent.metadata"]; ok {
		params["metadata"] = json.RawMessage(appendValue(nil, m))
	} else if len(req.GetMetadata()) > 0 {
		params["metadata"] = req.GetMetadata()
	}
	return json.Marshal(map[string]any{"id": 2, "method": "run.start", "params": params})
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
		m[g.str()] = g.value(depth)
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
			req.Metadata[g.str()] = g.str()
		}
	}
	return req
}

// TestRunStartBytes: runStart writes the bytes json.Marshal makes of the
// same maps, for requests with every kind of input, config and metadata
// and strings escaped differently by the two encoders.
func TestRunStartBytes(t *testing.T) {
	g := &commandGen{r: rand.New(rand.NewPCG(1, 2))}
	for i := range 3000 {
		req, assistant := g.request(), g.str()
		if assistant == "" {
			assistant = "agent"
		}
		want, err := runStartMarshal(req, assistant)
		if err != nil {
			t.Fatal(err)
		}
		if got := runStart(req, assistant); string(got) != string(want) {
			t.Fatalf("request %d (%v):\n got %s\nwant %s", i, req, got, want)
		}
	}
}

func BenchmarkRunStart(b *testing.B) {
	req := &canonical.Request{
		Inputs:     []*canonical.NamedNode{{Name: "messages", Node: canonical.TextNode("user", "What is the weather in Paris today?")}},
		Extensions: map[string]*structpb.Value{"agent.config": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"recursion_limit": structpb.NewNumberValue(25)}})},
		Metadata:   map[string]string{"user": "u-1"},
	}
	for _, impl := range []struct {
		name string
		f    func() ([]byte, error)
	}{
		{"hand", func() ([]byte, error) { return runStart(req, "agent"), nil }},
		{"marshal", func() ([]byte, error) { return runStartMarshal(req, "agent") }},
	} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := impl.f(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
