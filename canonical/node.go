package canonical

import (
	"strings"
)

// TextNode returns a text/plain leaf with role.
func TextNode(role, text string) *Node {
	return &Node{Mime: "text/plain", Role: role, Payload: &v1Data{Data: []byte(text)}}
}

// Leaves appends n's leaves in depth-first order (the flattened content).
func Leaves(out []*Node, n *Node) []*Node {
	if n == nil {
		return out
	}
	if len(n.GetChildren()) == 0 {
		return append(out, n)
	}
	for _, c := range n.GetChildren() {
		out = Leaves(out, c)
	}
	return out
}

// IsText reports whether a leaf holds text (text/* or no mime).
func IsText(n *Node) bool {
	m := n.GetMime()
	return n.GetPayload() != nil && (m == "" || strings.HasPrefix(m, "text/")) && n.GetRef() == ""
}

// Input returns the named input's node, or nil.
func Input(req *Request, name string) *Node {
	for _, in := range req.GetInputs() {
		if in.GetName() == name {
			return in.GetNode()
		}
	}
	return nil
}

// PromptText is the text a plain text model is asked about: the leaves of
// the input named "prompt" (else every input, in order). When leaves carry
// roles, it is the last user turn (the trailing user leaves); otherwise all
// text leaves, concatenated.
func PromptText(req *Request) string {
	var leaves []*Node
	if p := Input(req, "prompt"); p != nil {
		leaves = Leaves(nil, p)
	} else {
		for _, in := range req.GetInputs() {
			leaves = Leaves(leaves, in.GetNode())
		}
	}
	end := len(leaves)
	for end > 0 && leaves[end-1].GetRole() != "" && leaves[end-1].GetRole() != "user" {
		end--
	}
	start := end
	for start > 0 && leaves[start-1].GetRole() == "user" {
		start--
	}
	if start == end { // no roles: everything
		start, end = 0, len(leaves)
	}
	var sb strings.Builder
	for _, l := range leaves[start:end] {
		if IsText(l) {
			sb.Write(l.GetData())
		}
	}
	return sb.String()
}
