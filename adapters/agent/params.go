package agent

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	"github.com/interlingua-dev/interlingua/internal/json"
)

// params is a command's params object, key by key, with every camelCase key
// of the reference's rename table (section 2) also readable under its
// snake_case name (snake wins when both are present).
type params map[string]json.Value

// camelToSnake is the rename table of section 2, plus the SDK's
// multitaskStrategy.
var camelToSnake = map[string]string{
	"appliedThroughSeq": "applied_through_seq", "assistantId": "assistant_id",
	"cacheCreation": "cache_creation", "cacheRead": "cache_read", "checkpointId": "checkpoint_id",
	"citedText": "cited_text", "currentNamespaces": "current_namespaces", "endIndex": "end_index",
	"eventId": "event_id", "fileId": "file_id", "fromNode": "from_node", "graphName": "graph_name",
	"inputTokenDetails": "input_token_details", "inputTokens": "input_tokens", "interruptId": "interrupt_id",
	"lastEventId": "last_event_id", "mimeType": "mime_type", "missedEvents": "missed_events",
	"modelType": "model_type", "nodeName": "node_name", "outputTokenDetails": "output_token_details",
	"outputTokens": "output_tokens", "parentId": "parent_id", "replayedEvents": "replayed_events",
	"runId": "run_id", "serviceTier": "service_tier", "startIndex": "start_index",
	"subscriptionId": "subscription_id", "systemFingerprint": "system_fingerprint", "threadId": "thread_id",
	"toolCallId": "tool_call_id", "toolName": "tool_name", "totalTokens": "total_tokens",
	"interruptIds": "interrupt_ids", "langsmithTracer": "langsmith_tracer", "projectName": "project_name",
	"exampleId": "example_id", "multitaskStrategy": "multitask_strategy",
}

// parseParams decodes a params object; absent or null params are empty.
func parseParams(raw json.Value) (params, bool) {
	p := params{}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return p, true
	}
	if raw[0] != '{' || json.Unmarshal(raw, (*map[string]json.Value)(&p)) != nil {
		return nil, false
	}
	for k, v := range p {
		if s, ok := camelToSnake[k]; ok {
			if _, dup := p[s]; !dup {
				p[s] = v
			}
		}
	}
	return p, true
}

func decodeInto(raw json.Value, v any) bool { return json.Unmarshal(raw, v, peerJSON) == nil }

// has reports whether key is present and not null.
func (p params) has(key string) bool {
	v, ok := p[key]
	return ok && string(v) != "null"
}

// str reads a string param: ok is false when present with another type.
func (p params) str(key string) (s string, present, ok bool) {
	v, exists := p[key]
	if !exists || string(v) == "null" {
		return "", false, true
	}
	if err := json.Unmarshal(v, &s, peerJSON); err != nil {
		return "", true, false
	}
	return s, true, true
}

// object reads an object param (nil when absent); ok is false when present
// and not an object.
func (p params) object(key string) (m map[string]json.Value, ok bool) {
	v, exists := p[key]
	if !exists || string(v) == "null" {
		return nil, true
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &m, peerJSON) != nil {
		return nil, false
	}
	return m, true
}

// namespace reads a Namespace param (array of strings); nil when absent.
func (p params) namespace(key string) (ns []string, present, ok bool) {
	v, exists := p[key]
	if !exists || string(v) == "null" {
		return nil, false, true
	}
	if json.Unmarshal(v, &ns, peerJSON) != nil || bytes.TrimSpace(v)[0] != '[' {
		return nil, true, false
	}
	if ns == nil {
		ns = []string{}
	}
	return ns, true, true
}

// Every seq-like input is read by uintParam (a JSON number: since) or
// seqText (a string: last_event_id, Last-Event-ID), to one rule: an
// integer in 0..2^53-1, the event ids this server gives (larger ones
// overflowed arithmetic on them: a last_event_id of 2^64-1 reported one
// missed event).

// seqText reads a decimal seq from a string.
func seqText(s string) (uint64, bool) {
	u, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	return u, err == nil && u <= maxJSInt
}

// uintParam reads a JSON integer in 0..2^53-1 (not a boolean, not a float
// with a fraction).
func uintParam(raw json.Value) (uint64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] < '0' || raw[0] > '9') {
		return 0, false
	}
	if u, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
		return u, u <= maxJSInt
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > maxJSInt {
		return 0, false
	}
	return uint64(f), true
}

// maxJSInt is 2^53-1, the largest js-uint.
const maxJSInt = 1<<53 - 1
