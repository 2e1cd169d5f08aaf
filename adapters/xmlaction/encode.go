package xmlaction

import (
	"slices"
	"strings"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// maxDeferred bounds the tool results and errors an Encoder holds while a
// block is open; more are counted and reported once the block ends.
const maxDeferred = 1024

// Encoder renders a run's canonical events as an XML action stream, the
// text a model speaking the format would have written: reasoning blocks
// become <thought>, tool-call blocks <action> with the JSON body, text
// blocks <response>. Text is escaped (&lt; &amp; &#13;) so the output
// always parses back (with Decoder) to the same thought, action and
// response blocks; the elements below come back as text, and the
// actions as actions (to run again): the rendering is a view, one way.
//
// Beyond the three tags it writes three Interlingua elements, between
// blocks: <observation id=".." status="ok">result JSON</observation> (or
// status="error" code=".." with the message) for a tool's result,
// <interrupt id="..">payload JSON</interrupt> for an input request (the
// question of a run that then ends interrupted), and <error code=".."
// [status=".."]>message</error> for an error event or a run that did not
// complete. Events of nested namespaces, tool_started, tool_output, state,
// input answers and data or ref blocks are not rendered (the frontend
// hands the Encoder canonical.AnswerStream's view: the agent's answer,
// on the root).
//
// One Encoder renders one stream and is not safe for concurrent use.
type Encoder struct {
	open     canonical.BlockType // the open root block, 0 if none
	toolID   string
	foreign  bool // the tool call did not come from Decoder: its body is wrapped
	wrote    bool // foreign: argument bytes written
	noClose  bool // an unterminated action: the tag stays open
	inStr    bool // foreign: JSON string state of the arguments
	esc      bool
	deferred []*canonical.Event
	dropped  int
}

// NewEncoder returns an Encoder for one stream.
func NewEncoder() *Encoder { return &Encoder{} }

// Encode appends ev's rendering (often nothing) to out.
func (e *Encoder) Encode(out []byte, ev *canonical.Event) []byte {
	if len(ev.GetNamespace()) != 0 {
		return out
	}
	switch k := ev.GetKind().(type) {
	case *canonical.KindBlockStart:
		out = e.End(out)
		e.open = k.BlockStart.GetType()
		switch e.open {
		case canonical.BlockReasoning:
			out = append(out, "<thought>"...)
		case canonical.BlockText:
			out = append(out, "<response>"...)
		case canonical.BlockToolCall:
			out = e.startAction(out, ev, k.BlockStart)
		}
	case *canonical.KindBlockDelta:
		switch e.open {
		case canonical.BlockReasoning, canonical.BlockText:
			out = appendEscaped(out, k.BlockDelta.GetText())
		case canonical.BlockToolCall:
			out = e.args(out, k.BlockDelta.GetText())
		}
	case *canonical.KindBlockFinish:
		out = e.End(out)
	case *canonical.KindToolFailed:
		if ext := ev.GetExtensions()[extError]; ext != nil {
			// The decoder's own error: the rendered <action> carries it.
			if ext.GetStringValue() == kindUnterminated && e.open == canonical.BlockToolCall &&
				k.ToolFailed.GetToolCallId() == e.toolID {
				e.noClose = true
			}
			return out
		}
		out = e.element(out, ev)
	case *canonical.KindToolFinished, *canonical.KindError, *canonical.KindInputRequested:
		out = e.element(out, ev)
	case *canonical.KindLifecycle:
		if st, ok := canonical.TerminalOf(ev); ok && st != canonical.StatusCompleted {
			out = e.End(out)
			out = e.element(out, ev)
		}
	}
	return out
}

// End closes the open block's tag (a stream cut short) and writes what was
// held back while it was open.
func (e *Encoder) End(out []byte) []byte {
	switch e.open {
	case canonical.BlockReasoning:
		out = append(out, "</thought>\n"...)
	case canonical.BlockText:
		out = append(out, "</response>\n"...)
	case canonical.BlockToolCall:
		if e.foreign {
			if !e.wrote {
				out = append(out, "{}"...)
			}
			out = append(out, '}')
		}
		if !e.noClose {
			out = append(out, "</action>\n"...)
		}
	}
	e.open, e.toolID, e.foreign, e.wrote, e.noClose, e.inStr, e.esc = 0, "", false, false, false, false, false
	deferred := e.deferred
	e.deferred = nil
	for _, ev := range deferred {
		out = e.element(out, ev)
	}
	if e.dropped > 0 {
		out = append(out, `<error code="resource_exhausted">`...)
		out = append(out, itoa(e.dropped)...)
		out = append(out, " tool results were not rendered (more than 1024 during one block)</error>\n"...)
		e.dropped = 0
	}
	return out
}

// startAction writes an <action> tag: the decoder's attributes as written,
// or, for a tool call from elsewhere, type, mode, id and the opening of a
// body {"name":..,"parameters":..}.
func (e *Encoder) startAction(out []byte, ev *canonical.Event, bs *canonical.BlockStart) []byte {
	e.toolID = bs.GetId()
	out = append(out, "<action"...)
	attrs := ev.GetExtensions()[extAttributes].GetStructValue()
	if attrs == nil {
		e.foreign = true
		out = appendAttr(out, "type", typeTool)
		out = appendAttr(out, "mode", modeSync)
		out = appendAttr(out, "id", bs.GetId())
		out = append(out, `>{"name":`...)
		name, _ := json.Marshal(bs.GetName(), htmlSafeOptions) // as encoding/json's Marshal: <, > and & escaped
		out = append(out, name...)
		return append(out, `,"parameters":`...)
	}
	names := make([]string, 0, len(attrs.GetFields()))
	for n := range attrs.GetFields() {
		names = append(names, n)
	}
	rank := func(n string) int {
		switch n {
		case "type":
			return 0
		case "mode":
			return 1
		case "id":
			return 2
		}
		return 3
	}
	slices.SortFunc(names, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	for _, n := range names {
		out = appendAttr(out, n, attrs.GetFields()[n].GetStringValue())
	}
	return append(out, '>')
}

// args writes tool-call argument text: the decoder's bodies as they are (a
// </action> in them lies inside a JSON string); other arguments with '<'
// outside strings written as \u003c, so they cannot close the tag.
func (e *Encoder) args(out []byte, s string) []byte {
	if !e.foreign {
		return append(out, s...)
	}
	if s != "" {
		e.wrote = true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case e.inStr && e.esc:
			e.esc = false
		case e.inStr && c == '\\':
			e.esc = true
		case c == '"':
			e.inStr = !e.inStr
		case !e.inStr && c == '<':
			out = append(out, `\u003c`...)
			continue
		}
		out = append(out, c)
	}
	return out
}

// element writes an <observation> or <error> element, or defers it while a
// block is open.
func (e *Encoder) element(out []byte, ev *canonical.Event) []byte {
	if e.open != 0 {
		if len(e.deferred) < maxDeferred {
			e.deferred = append(e.deferred, ev)
		} else {
			e.dropped++
		}
		return out
	}
	switch k := ev.GetKind().(type) {
	case *canonical.KindToolFinished:
		out = append(out, "<observation"...)
		out = appendAttr(out, "id", k.ToolFinished.GetToolCallId())
		out = appendAttr(out, "status", "ok")
		out = append(out, '>')
		var v any
		if o := k.ToolFinished.GetOutput(); o != nil {
			v = o.AsInterface()
		}
		out = appendEscaped(out, marshalCompact(v))
		return append(out, "</observation>\n"...)
	case *canonical.KindToolFailed:
		out = append(out, "<observation"...)
		out = appendAttr(out, "id", k.ToolFailed.GetToolCallId())
		out = appendAttr(out, "status", "error")
		out = appendAttr(out, "code", wireCode(canonical.Code(k.ToolFailed.GetError().GetCode())))
		out = append(out, '>')
		out = appendEscaped(out, k.ToolFailed.GetError().GetMessage())
		return append(out, "</observation>\n"...)
	case *canonical.KindInputRequested:
		out = append(out, "<interrupt"...)
		out = appendAttr(out, "id", k.InputRequested.GetInterruptId())
		out = append(out, '>')
		var v any
		if p := k.InputRequested.GetPayload(); p != nil {
			v = p.AsInterface()
		}
		out = appendEscaped(out, marshalCompact(v))
		return append(out, "</interrupt>\n"...)
	case *canonical.KindError:
		out = append(out, "<error"...)
		out = appendAttr(out, "code", wireCode(canonical.Code(k.Error.GetCode())))
		out = append(out, '>')
		out = appendEscaped(out, k.Error.GetMessage())
		return append(out, "</error>\n"...)
	case *canonical.KindLifecycle:
		lc := k.Lifecycle
		out = append(out, "<error"...)
		msg := "the run is waiting for input"
		if err := lc.GetError(); err != nil {
			out = appendAttr(out, "code", wireCode(canonical.Code(err.GetCode())))
			msg = err.GetMessage()
		}
		status := strings.TrimPrefix(strings.ToLower(lc.GetStatus().String()), "run_status_")
		out = appendAttr(out, "status", status)
		out = append(out, '>')
		out = appendEscaped(out, msg)
		return append(out, "</error>\n"...)
	}
	return out
}

// appendAttr writes ` name="value"`. Values are written as they are (the
// format decodes no entity in attributes): in double quotes, else in
// single quotes, else unquoted; a value that none of these can carry
// (both quote characters and a space, '>' or a quote after '=') has its
// double quotes turned into single ones.
func appendAttr(out []byte, name, value string) []byte {
	out = append(out, ' ')
	out = append(out, name...)
	out = append(out, '=')
	switch attrForm(value) {
	case '"', '\'':
		q := attrForm(value)
		out = append(out, q)
		out = append(out, value...)
		return append(out, q)
	case 0:
		return append(out, value...)
	}
	out = append(out, '"')
	out = append(out, strings.ReplaceAll(value, `"`, `'`)...)
	return append(out, '"')
}

// attrForm is how value can be written: '"' or '\” (the quote to use), 0
// (unquoted), or '!' when no form carries it as it is.
func attrForm(value string) byte {
	switch {
	case strings.IndexByte(value, '"') < 0:
		return '"'
	case strings.IndexByte(value, '\'') < 0:
		return '\''
	case value == "", value[0] == '"', value[0] == '\'', value[len(value)-1] == '/',
		strings.ContainsAny(value, " \t\n\r\f\v>"),
		strings.Contains(value, `="`), strings.Contains(value, "='"):
		return '!'
	}
	return 0
}

// appendEscaped appends s with '<', '&' and CR as character references.
func appendEscaped(out []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		var rep string
		switch s[i] {
		case '<':
			rep = "&lt;"
		case '&':
			rep = "&amp;"
		case '\r':
			rep = "&#13;"
		default:
			continue
		}
		out = append(out, s[start:i]...)
		out = append(out, rep...)
		start = i + 1
	}
	return append(out, s[start:]...)
}

// marshalCompact is v as compact JSON with keys sorted and no HTML
// escaping (writeOptions: as the encoding/json Encoder it replaces wrote
// it), "null" when v has no JSON form.
func marshalCompact(v any) string {
	b, err := json.Marshal(v, writeOptions)
	if err != nil {
		return "null"
	}
	return string(b)
}
