package xmlaction

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/interlingua-dev/interlingua/canonical"
)

// Action types and modes.
const (
	typeTool     = "tool"
	typeRelic    = "relic"
	typeAgent    = "agent"
	typeLLM      = "llm"
	typeWorkflow = "workflow"

	modeSync   = "sync"
	modeAsync  = "async"
	modeFire   = "fire_and_forget"
	onErrFail  = "fail"
	onErrSkip  = "skip"
	onErrRetry = "retry"
)

// action is a parsed <action>: what the executor runs.
type action struct {
	ord       int
	id        string
	typ       string
	mode      string
	name      string
	params    map[string]any // numbers as number (as written)
	outputKey string
	dependsOn []string
	timeout   time.Duration // 0: the default
	retry     int
	onError   string
	inThought bool

	err *actionError // why it cannot run; nil when valid
	dup bool         // its id was used by an earlier action
}

// attr is one attribute of an opening tag.
type attr struct{ name, value string }

// parseAttrs reads name="v", name='v' and name=v (up to whitespace) and
// bare names; names are lower-cased, the first occurrence of a name wins,
// and no entity is decoded.
func parseAttrs(p []byte) []attr {
	var out []attr
	i := 0
	for {
		for i < len(p) && isSpace(p[i]) {
			i++
		}
		if i >= len(p) {
			return out
		}
		start := i
		for i < len(p) && !isSpace(p[i]) && p[i] != '=' {
			i++
		}
		name := strings.ToLower(string(p[start:i]))
		for i < len(p) && isSpace(p[i]) {
			i++
		}
		value := ""
		if i < len(p) && p[i] == '=' {
			i++
			for i < len(p) && isSpace(p[i]) {
				i++
			}
			if i < len(p) && (p[i] == '"' || p[i] == '\'') {
				q := p[i]
				i++
				vs := i
				for i < len(p) && p[i] != q {
					i++
				}
				value = string(p[vs:i])
				if i < len(p) {
					i++
				}
			} else {
				vs := i
				for i < len(p) && !isSpace(p[i]) {
					i++
				}
				value = string(p[vs:i])
			}
		}
		if name == "" {
			i++ // a stray '='
			continue
		}
		if _, seen := attrValue(out, name); !seen {
			out = append(out, attr{validText(name), validText(value)})
		}
	}
}

// validText makes s valid UTF-8, a U+FFFD per invalid byte as canonical's
// accumulator does, so an attribute that reaches an event (an action id, a
// tool error quoting a bad type) renders and parses back the same.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var acc canonical.TextAccumulator
	return acc.AppendString(s) + acc.Flush()
}

func attrValue(attrs []attr, name string) (string, bool) {
	for _, a := range attrs {
		if a.name == name {
			return a.value, true
		}
	}
	return "", false
}

// trimFence trims whitespace and one Markdown code fence around a body.
func trimFence(body []byte) []byte {
	b := bytes.TrimSpace(body)
	if !bytes.HasPrefix(b, []byte("```")) {
		return b
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || !bytes.HasSuffix(b, []byte("```")) || len(b) < nl+4 {
		return b
	}
	return bytes.TrimSpace(b[nl+1 : len(b)-3])
}

// parseAction validates a complete action. It always returns the action
// (with id and ordinal), and the first problem found, if any.
func (d *Decoder) parseAction(p *pendingAction) (*action, *actionError) {
	a := &action{ord: p.ord, id: p.id, inThought: p.inThought, typ: typeTool, mode: modeSync, onError: onErrFail}
	if p.ord > d.cfg.MaxActions {
		return a, actionErrf(kindTooManyActions, "more than MaxActions (%d) actions in one stream", d.cfg.MaxActions)
	}
	// The body is read as its argument deltas carried it (an invalid byte
	// as U+FFFD), so an error that quotes a character quotes the one the
	// client saw, and a rendering parses back to the same error.
	body := trimFence(p.body)
	if !utf8.Valid(body) {
		body = canonical.AppendValidUTF8(nil, body)
	}
	if err := a.parseBody(body); err != nil {
		return a, err
	}
	if v, ok := attrValue(p.attrs, "type"); ok {
		a.typ = v
	}
	switch a.typ {
	case typeTool, typeRelic, typeAgent, typeLLM, typeWorkflow:
	default:
		return a, actionErrf(kindInvalidAttribute, "type %q is not tool, relic, agent, llm or workflow", a.typ)
	}
	if v, ok := attrValue(p.attrs, "mode"); ok {
		a.mode = v
	}
	switch a.mode {
	case modeSync, modeAsync, modeFire:
	default:
		return a, actionErrf(kindInvalidAttribute, "mode %q is not sync, async or fire_and_forget", a.mode)
	}
	if v, ok := attrValue(p.attrs, "depends_on"); ok {
		a.dependsOn = mergeIDs(a.dependsOn, strings.FieldsFunc(v, func(r rune) bool {
			return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
		}))
	}
	if d.ids[a.id] {
		return a, actionErrf(kindDuplicateID, "id %q is already used by an earlier action", a.id)
	}
	return a, nil
}

// parseBody reads the JSON body's fields.
func (a *action) parseBody(body []byte) *actionError {
	if len(body) == 0 {
		return actionErrf(kindEmptyBody, "the action body is empty")
	}
	v, err := decodeJSON(body)
	if err != nil {
		return actionErrf(kindInvalidJSON, "%v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return actionErrf(kindNotAnObject, "the body is %s, not a JSON object", jsonKind(v))
	}
	if s, ok := obj["name"].(string); ok && s != "" {
		a.name = s
	} else {
		return actionErrf(kindMissingName, `"name" must be a non-empty string`)
	}
	switch p := obj["parameters"].(type) {
	case nil:
		a.params = map[string]any{}
	case map[string]any:
		a.params = p
	default:
		return actionErrf(kindInvalidField, `"parameters" must be an object, not %s`, jsonKind(p))
	}
	if k, present := obj["output_key"]; present && k != nil {
		s, ok := k.(string)
		if !ok || !isIdent(s) {
			return actionErrf(kindInvalidField, `"output_key" must match [A-Za-z_][A-Za-z0-9_]*`)
		}
		a.outputKey = s
	}
	switch dep := obj["depends_on"].(type) {
	case nil:
	case string:
		a.dependsOn = mergeIDs(nil, []string{dep})
	case []any:
		ids := make([]string, 0, len(dep))
		for _, e := range dep {
			s, ok := e.(string)
			if !ok {
				return actionErrf(kindInvalidField, `"depends_on" must be a string or an array of strings`)
			}
			ids = append(ids, s)
		}
		a.dependsOn = mergeIDs(nil, ids)
	default:
		return actionErrf(kindInvalidField, `"depends_on" must be a string or an array of strings`)
	}
	if t, present := obj["timeout"]; present && t != nil {
		n, ok := t.(number)
		f, err := n.float()
		if !ok || err != nil || !(f > 0) || f > math.MaxInt64/float64(time.Second) {
			return actionErrf(kindInvalidField, `"timeout" must be a number of seconds > 0`)
		}
		a.timeout = time.Duration(f * float64(time.Second))
	}
	_, retrySet := obj["retry"]
	if r, present := obj["retry"]; present && r != nil {
		n, ok := r.(number)
		i, err := strconv.ParseInt(string(n), 10, 64)
		if !ok || err != nil || i < 0 || i > math.MaxInt32 {
			return actionErrf(kindInvalidField, `"retry" must be an integer >= 0`)
		}
		a.retry = int(i)
	}
	if e, present := obj["on_error"]; present && e != nil {
		s, _ := e.(string)
		switch s {
		case onErrFail, onErrSkip, onErrRetry:
			a.onError = s
		default:
			return actionErrf(kindInvalidField, `"on_error" must be "fail", "skip" or "retry"`)
		}
		if s == onErrRetry && !retrySet {
			a.retry = 3
		}
	}
	return nil
}

// mergeIDs appends ids not yet in list, in order.
func mergeIDs(list, ids []string) []string {
	for _, id := range ids {
		if id == "" {
			continue
		}
		dup := false
		for _, x := range list {
			if x == id {
				dup = true
				break
			}
		}
		if !dup {
			list = append(list, id)
		}
	}
	return list
}

func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}
