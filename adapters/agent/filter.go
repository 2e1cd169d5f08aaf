package agent

import (
	"fmt"
	"strings"
)

// Channels (section 5.1); "custom:<name>" lanes are matched by prefix.
var knownChannels = map[string]bool{
	"values": true, "updates": true, "messages": true, "tools": true, "lifecycle": true,
	"input": true, "checkpoints": true, "tasks": true, "custom": true,
}

// allChannels is every channel, for clients (our backend) that want all.
var allChannels = []string{"values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks", "custom"}

// filter is one subscription's EventStreamRequest / SubscribeParams filter,
// matched exactly as the JS and Python servers and the SDK do (section 7):
// channel, then namespace prefix with segment normalisation, then depth
// (ignored when no namespaces are given).
type filter struct {
	channels   []string
	namespaces [][]string // nil: every namespace
	depth      int
	hasDepth   bool
}

func (f *filter) matchChannel(method, custom string) bool {
	ch := method
	switch method {
	case methodInputRequested, methodInputAnswered:
		ch = "input"
	case methodCustom:
		ch = "custom"
	}
	for _, c := range f.channels {
		if c == ch {
			return true
		}
		if method == methodCustom && custom != "" && len(c) == len("custom:")+len(custom) &&
			strings.HasPrefix(c, "custom:") && c[len("custom:"):] == custom {
			return true
		}
	}
	return false
}

func (f *filter) match(r *record) bool {
	if !f.matchChannel(r.method, r.custom) {
		return false
	}
	if len(f.namespaces) == 0 {
		return true
	}
	for _, p := range f.namespaces {
		if prefixMatch(r.ns, p) && (!f.hasDepth || len(r.ns)-len(p) <= f.depth) {
			return true
		}
	}
	return false
}

// prefixMatch is rule 3: each prefix segment equals the event's, or has no
// ':' and equals the event's segment cut at its first ':'.
func prefixMatch(ns, prefix []string) bool {
	if len(prefix) > len(ns) {
		return false
	}
	for i, p := range prefix {
		s := ns[i]
		if s == p {
			continue
		}
		if strings.IndexByte(p, ':') >= 0 {
			return false
		}
		if j := strings.IndexByte(s, ':'); j >= 0 && s[:j] == p {
			continue
		}
		return false
	}
	return true
}

// parseFilter validates the filter fields of an EventStreamRequest or
// SubscribeParams. cmd names the command in messages.
func parseFilter(p params, cmd string) (*filter, *protoError) {
	f := &filter{}
	raw, ok := p["channels"]
	if !ok || string(raw) == "null" {
		return nil, perr(errInvalidArgument, cmd+" requires a non-empty channels array.")
	}
	var chans []string
	if !decodeInto(raw, &chans) {
		return nil, perr(errInvalidArgument, cmd+": channels must be an array of strings.")
	}
	if len(chans) == 0 {
		return nil, perr(errInvalidArgument, cmd+" requires a non-empty channels array.")
	}
	if len(chans) > 64 {
		return nil, perr(errInvalidArgument, cmd+": channels has more than 64 entries.")
	}
	for i, c := range chans {
		if !knownChannels[c] && !(strings.HasPrefix(c, "custom:") && len(c) > len("custom:")) {
			return nil, perr(errInvalidArgument, fmt.Sprintf("%s: channels[%d] %q is an unsupported channel.", cmd, i, c))
		}
	}
	f.channels = chans
	if raw, ok := p["namespaces"]; ok && string(raw) != "null" {
		var nss [][]string
		if !decodeInto(raw, &nss) {
			return nil, perr(errInvalidArgument, cmd+": namespaces must be an array of namespaces (arrays of strings).")
		}
		if len(nss) > 256 {
			return nil, perr(errInvalidArgument, cmd+": namespaces has more than 256 entries.")
		}
		for i, ns := range nss {
			if ns == nil {
				nss[i] = []string{}
			}
		}
		f.namespaces = nss
	}
	if raw, ok := p["depth"]; ok && string(raw) != "null" {
		d, ok := uintParam(raw)
		if !ok || d > 1<<20 {
			return nil, perr(errInvalidArgument, cmd+": depth must be a non-negative integer.")
		}
		f.depth, f.hasDepth = int(d), true
	}
	return f, nil
}
