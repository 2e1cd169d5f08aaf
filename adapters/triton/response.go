package triton

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/interlingua-dev/interlingua/canonical"
	"github.com/interlingua-dev/interlingua/internal/json"
)

// responseOptions: members are read in order, so of duplicates the last
// wins, as our reading of Triton's responses always had it; string bytes
// pass as the upstream wrote them (rapidjson writes model output raw, and
// a rune may be split across responses: stringBytes keeps its bytes). One
// joined value, as the Decoder's Reset joins what it is given each time.
var responseOptions = json.JoinOptions(json.AllowDuplicateNames(true), json.AllowInvalidUTF8(true))

// responseReader reads Triton response objects (reference section 3) with
// one reused Decoder; f.text is its buffer, valid until the next read.
type responseReader struct {
	src  bytes.Buffer // the response, which the Decoder reads in place
	dec  *json.Decoder
	text []byte

	// known is what the stream's responses repeat before text_output's
	// value: the model's name and version and, from TensorRT-LLM, its
	// outputs not asked for (zeros), the same bytes in every response,
	// up to and with the name "text_output". A response that begins with
	// them is read as knownHead and the rest (doc): those members set no
	// field, so this reads what the whole response reads, without reading
	// them again (TestKnownPrefix). They were read by the Decoder, whose
	// state after them (inside the object, a value next) is knownHead's.
	known []byte
	doc   []byte
}

// knownHead stands for a known prefix.
const knownHead = `{"text_output"`

// read reads a response: text_output (a string, or an array of strings
// for a multi-element output, concatenated), error, model_name and
// model_version (with meta set only) and vLLM's finish_reason and token
// counts; other members are skipped. A NUL byte ends the input, as in
// rapidjson's in-memory streams.
func (r *responseReader) read(data []byte, f *responseFields, meta bool) error {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		data = data[:i]
	}
	if !meta && len(r.known) > 0 && bytes.HasPrefix(data, r.known) {
		r.doc = append(append(r.doc[:0], knownHead...), data[len(r.known):]...)
		if r.object(r.doc, f, false, false) == nil {
			return nil
		}
		// An error is worded and placed in the whole response.
	}
	return r.object(data, f, meta, !meta)
}

// object reads the response data; with record set, the bytes up to its
// first text_output's value become the known prefix if the members before
// it set no field.
func (r *responseReader) object(data []byte, f *responseFields, meta, record bool) error {
	*f = responseFields{}
	r.src = *bytes.NewBuffer(data)
	if r.dec == nil {
		r.dec = json.NewDecoder(&r.src, responseOptions)
	} else {
		r.dec.Reset(&r.src, responseOptions)
	}
	d := r.dec
	if d.PeekKind() != '{' {
		return canonical.Errorf(canonical.CodeInternal, "upstream response is not a JSON object")
	}
	if _, err := d.ReadToken(); err != nil {
		return badResponse(rapidError(data, d, err, false))
	}
	for d.PeekKind() != '}' {
		name, err := d.ReadValue()
		if err != nil {
			return badResponse(rapidError(data, d, err, false))
		}
		key := unquoted(name)
		if record && string(key) == "text_output" {
			if record = false; !f.setAny() {
				r.known = append(r.known[:0], data[:d.InputOffset()]...)
			}
		}
		if serr := r.member(data, key, f, meta); serr != nil {
			return badResponse(serr)
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return badResponse(rapidError(data, d, err, false))
	}
	if end := skipSpace(data, int(d.InputOffset())); end < len(data) {
		return badResponse(&syntaxError{msg: errRootNotSingular, off: end})
	}
	return nil
}

// member reads the value of the member named key (a part of the
// Decoder's buffer, so compared before the value is read).
func (r *responseReader) member(data, key []byte, f *responseFields, meta bool) *syntaxError {
	name := ""
	switch string(key) {
	case "text_output":
		return r.readText(data, f)
	case "error":
		s, err := r.scalarText(data)
		f.err, f.hasErr = validUTF8(s), err == nil
		return err
	case "model_name":
		name = "model_name"
	case "model_version":
		name = "model_version"
	case "finish_reason":
		name = "finish_reason"
	case "num_input_tokens":
		name = "num_input_tokens"
	case "num_output_tokens":
		name = "num_output_tokens"
	}
	if name == "" || !meta && name[0] == 'm' {
		return skipValue(data, r.dec)
	}
	s, err := r.scalarText(data)
	if err == nil {
		f.set(name, s)
	}
	return err
}

// scalarText reads a string (its bytes) or any other value (its JSON text,
// so a numeric model_version or a one-element array reads as text).
func (r *responseReader) scalarText(data []byte) ([]byte, *syntaxError) {
	if r.dec.PeekKind() != '"' {
		start := skipSpace(data, int(r.dec.InputOffset()))
		if err := skipValue(data, r.dec); err != nil {
			return nil, err
		}
		return bytes.TrimLeft(data[start:r.dec.InputOffset()], " \t\n\r:"), nil
	}
	v, err := r.dec.ReadValue()
	if err != nil {
		return nil, rapidError(data, r.dec, err, false)
	}
	return unquoted(v), nil
}

// readText reads text_output: a string, or an array of strings joined.
func (r *responseReader) readText(data []byte, f *responseFields) *syntaxError {
	d := r.dec
	r.text = r.text[:0]
	switch d.PeekKind() {
	case '"':
		v, err := d.ReadValue()
		if err != nil {
			return rapidError(data, d, err, false)
		}
		r.text = stringBytes(r.text, v)
	case '[':
		if _, err := d.ReadToken(); err != nil {
			return rapidError(data, d, err, false)
		}
		for d.PeekKind() != ']' {
			if d.PeekKind() != '"' {
				return textTypeError(data, d)
			}
			v, err := d.ReadValue()
			if err != nil {
				return rapidError(data, d, err, false)
			}
			r.text = stringBytes(r.text, v)
		}
		if _, err := d.ReadToken(); err != nil {
			return rapidError(data, d, err, false)
		}
	default:
		return textTypeError(data, d)
	}
	f.text, f.hasText = r.text, true
	return nil
}

// textTypeError is the error for a text_output (or an element of it) that
// is not a string: rapidjson's reader checks the type at the value's first
// byte, before the value's syntax.
func textTypeError(data []byte, d *json.Decoder) *syntaxError {
	start := skipSpace(data, int(d.InputOffset()))
	kind, n := d.StackIndex(d.StackDepth())
	delim := byte(':')
	if kind == '[' {
		delim = ','
	}
	if n > 0 && start < len(data) && data[start] == delim {
		start = skipSpace(data, start+1)
	} else if n > 0 || start < len(data) && data[start] == '"' {
		_, err := d.ReadToken() // no delimiter, or a string the Decoder would not take
		return rapidError(data, d, err, false)
	}
	if start < len(data) && data[start] == '"' {
		_, err := d.ReadToken()
		return rapidError(data, d, err, false)
	}
	return &syntaxError{msg: errTextOutputType, off: start}
}

// errTextOutputType reports a text_output that is neither a string nor an
// array of strings.
const errTextOutputType = "text_output is not a string or an array of strings."

// skipValue skips the next value, refusing nesting deeper than Triton's
// limit (the library's own is far deeper).
func skipValue(data []byte, d *json.Decoder) *syntaxError {
	if k := d.PeekKind(); k != '{' && k != '[' {
		if err := d.SkipValue(); err != nil {
			return rapidError(data, d, err, false)
		}
		return nil
	}
	base := d.StackDepth()
	for {
		tok, err := d.ReadToken()
		if err != nil {
			return rapidError(data, d, err, false)
		}
		switch tok.Kind() {
		case '{', '[':
			if d.StackDepth() > maxJSONDepth {
				return &syntaxError{msg: depthMessage, off: int(d.InputOffset()) - 1, tooDeep: true}
			}
		case '}', ']':
			if d.StackDepth() == base {
				return nil
			}
		}
	}
}

// unquoted is the bytes of the JSON string v: a part of v when it has no
// escapes, else a copy.
func unquoted(v json.Value) []byte {
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1]
	}
	return stringBytes(nil, v)
}

// stringBytes appends the bytes of the JSON string v (quoted, as a
// Decoder read it) to dst. Unlike the library's unquoting it keeps invalid
// UTF-8 as it came: escapes are ASCII, so only the runs between invalid
// bytes need unescaping. A run the library refuses (a lone surrogate
// escape) adds nothing.
func stringBytes(dst []byte, v json.Value) []byte {
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return append(dst, body...)
	}
	if utf8.Valid(body) {
		return appendUnquoted(dst, v)
	}
	var quoted []byte
	for len(body) > 0 {
		n := validPrefix(body)
		if n > 0 {
			quoted = append(append(append(quoted[:0], '"'), body[:n]...), '"')
			dst, body = appendUnquoted(dst, quoted), body[n:]
			continue
		}
		dst, body = append(dst, body[0]), body[1:]
	}
	return dst
}

// appendUnquoted appends the text of the JSON string v to dst, or nothing
// when the library refuses it.
func appendUnquoted(dst, v []byte) []byte {
	if out, err := json.AppendUnquote(dst, v); err == nil {
		return out
	}
	return dst
}

// validPrefix is the length of the longest valid UTF-8 prefix of b.
func validPrefix(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < 0x80 {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// badResponse is the error for a response that is not valid JSON.
func badResponse(err *syntaxError) error {
	return canonical.Errorf(canonical.CodeInternal, "upstream response is not valid JSON: %s", err.Error())
}

func (f *responseFields) set(key string, s []byte) {
	switch key {
	case "model_name":
		f.modelName = validUTF8(s)
	case "model_version":
		f.modelVersion = validUTF8(s)
	case "finish_reason":
		f.finishReason = string(s)
	case "num_input_tokens":
		f.numInput, _ = strconv.ParseInt(string(s), 10, 64)
	case "num_output_tokens":
		f.numOutput, _ = strconv.ParseInt(string(s), 10, 64)
	}
}
