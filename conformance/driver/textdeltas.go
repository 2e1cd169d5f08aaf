package driver

import (
	cv1 "github.com/interlingua-dev/interlingua/gen/interlingua/conformance/v1"
)

// TextDeltas returns the text deltas r's root text produces on a text-only
// wire: the echoed prompt's words, then every text item's deltas, in
// order (reasoning, tool calls, tool activity, data, refs and non-terminal
// errors have no place on such a wire).
func TextDeltas(r *cv1.Response, prompt string) []string {
	var out []string
	if r.GetEcho() {
		out = append(out, Words(prompt)...)
	}
	for _, it := range r.GetItems() {
		if t := it.GetText(); t != nil {
			out = append(out, Deltas(t)...)
		}
	}
	return out
}
