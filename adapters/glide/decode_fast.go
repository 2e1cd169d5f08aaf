package glide

import (
	"bytes"
	"strings"
	"sync"

	"github.com/interlingua-dev/interlingua/internal/jsonw"
)

// This file is the fast path of decodeResponse, for the frame that makes up
// nearly all of a stream: a chunk whose message carries plain text. It
// decodes into a recycled frame and costs one allocation at most (the
// strings the frame does not hold already: mostly the content alone), in
// one of two ways:
//
//   - again: the frame is the one this recycled frame was decoded from,
//     but for the content string (a stream's chunks differ in little else;
//     their timestamps change once a second). Comparing the bytes around
//     the content is enough.
//   - decodeResponseFast: the frame is scanned by hand (decode_scan.go)
//     instead of reflected into by encoding/json.
//
// It must never disagree with decodeResponseJSON, so it gives up (ok
// false) on anything whose meaning takes more than copying bytes: a string
// with an escape or invalid UTF-8, null, a value of another type, a key
// repeated or spelled other than exactly as tagged (encoding/json matches
// keys case-insensitively), an error frame, a frame without id or chunk,
// invalid JSON anywhere (encoding/json checks the whole frame, skipped
// values too). The differential tests in decode_fast_test.go hold it to
// that.

// framePool recycles the frames of the fast path: decodeResponse takes one
// (in the backend's read loop), Frame gives it back (in the run's stream).
// A frame keeps its strings and lastFrame while in the pool.
var framePool = sync.Pool{New: func() any { return new(responseFrame) }}

// releaseFrame returns a fast-path frame to framePool; any other frame is
// left to the garbage collector.
func releaseFrame(f *responseFrame) {
	if f.pooled {
		framePool.Put(f)
	}
}

// lastFrame is the frame a recycled responseFrame was decoded from. The
// chunks of a stream differ mostly in their content (the timestamps change
// once a second): a frame equal to the last one but for the content string
// has the same meaning but for the content, and needs no more decoding.
type lastFrame struct {
	raw    []byte // a copy of the frame, or empty
	lo, hi int    // where its content's bytes are
}

// maxLastFrame bounds the frame lastFrame keeps; longer frames are always
// decoded in full.
const maxLastFrame = 4 << 10

// again reports whether data is f's last frame but for the content (a
// plain string, as str reads it), and if so takes the new content.
func (f *responseFrame) again(data []byte) bool {
	l := &f.last
	if len(l.raw) == 0 || len(data) < l.lo || !bytes.Equal(data[:l.lo], l.raw[:l.lo]) {
		return false
	}
	var sp span
	content := &f.chunk.ModelResponse.Message.Content
	end := scan(data).str(l.lo-1, &sp, *content) // l.lo-1 is the opening quote
	if end < 0 || !bytes.Equal(data[end-1:], l.raw[l.hi:]) {
		return false
	}
	if !sp.same {
		*content = string(data[sp.lo:sp.hi])
	}
	return true
}

// fastChunk is what the fast path reads from a chunk frame into f, a
// recycled frame: the strings f still holds from its last frame are hints
// (see str), kept where the new frame repeats them.
type fastChunk struct {
	f *responseFrame

	id, modelID, providerID, modelName, responseID, role, content, finish span

	cached, hasChunk, hasFinish bool
}

// decodeResponseFast decodes a chunk frame whose strings need no
// unescaping; ok false means "not handled here", never "invalid".
func decodeResponseFast(data []byte) (f *responseFrame, ok bool) {
	f = framePool.Get().(*responseFrame)
	if f.again(data) {
		return f, true
	}
	d, v := scan(data), fastChunk{f: f}
	var seen uint8
	i := d.object(0, func(key []byte, i int) int {
		switch string(key) {
		case "id":
			return d.str(once(&seen, 1, i), &v.id, f.ID)
		case "chunk":
			v.hasChunk = true
			return v.chunk(d, once(&seen, 2, i))
		case "error":
			return -1
		}
		return unknownKey
	})
	if i < 0 || d.ws(i) != len(data) || v.id.hi == v.id.lo || !v.hasChunk {
		framePool.Put(f)
		return nil, false
	}
	f.pooled = true
	f.last = lastFrame{raw: f.last.raw[:0]} // (its buffer is reused)
	if v.content.lo > 0 && len(data) <= maxLastFrame {
		f.last = lastFrame{append(f.last.raw, data...), v.content.lo, v.content.hi}
	}
	c := &f.chunk
	f.Chunk = c
	c.Cached = v.cached
	c.FinishReason = nil
	if v.hasFinish {
		c.FinishReason = &f.finish
	}
	// A stream's chunks repeat their id, model and role: a field equal to
	// the one the recycled frame holds keeps that string. The others
	// (mostly the content alone) are copied into one new string: a frame
	// costs one allocation at most.
	fields := [...]struct {
		sp  span
		dst *string
	}{
		{v.id, &f.ID}, {v.modelID, &c.ModelID}, {v.providerID, &c.ProviderID}, {v.modelName, &c.ModelName},
		{v.responseID, &c.ModelResponse.Metadata.ResponseID}, {v.role, &c.ModelResponse.Message.Role},
		{v.finish, &f.finish}, {v.content, &c.ModelResponse.Message.Content},
	}
	if v.content.escaped {
		f.scratch = jsonw.Unquote(f.scratch[:0], data[v.content.lo:v.content.hi])
	}
	value := func(sp span) []byte {
		if sp.escaped {
			return f.scratch
		}
		return data[sp.lo:sp.hi]
	}
	n, changed := 0, false
	for k := range fields {
		if x := &fields[k]; x.sp.same {
			x.dst = nil
		} else {
			n, changed = n+len(value(x.sp)), true
		}
	}
	if !changed {
		return f, true
	}
	var b strings.Builder
	b.Grow(n)
	for k := range fields {
		if x := &fields[k]; x.dst != nil {
			b.Write(value(x.sp))
		}
	}
	all, off := b.String(), 0
	for k := range fields {
		if x := &fields[k]; x.dst != nil {
			*x.dst = all[off : off+len(value(x.sp))]
			off += len(value(x.sp))
		}
	}
	return f, true
}

// chunk reads the chunk object (Glide's ChatStreamChunk) at d[i:].
func (v *fastChunk) chunk(d scan, i int) int {
	var seen uint8
	return d.object(i, func(key []byte, i int) int {
		switch string(key) {
		case "model_id":
			return d.str(once(&seen, 1, i), &v.modelID, v.f.chunk.ModelID)
		case "provider_id":
			return d.str(once(&seen, 2, i), &v.providerID, v.f.chunk.ProviderID)
		case "model_name":
			return d.str(once(&seen, 4, i), &v.modelName, v.f.chunk.ModelName)
		case "cached":
			return d.boolean(once(&seen, 8, i), &v.cached)
		case "model_response":
			return v.modelResponse(d, once(&seen, 16, i))
		case "finish_reason":
			v.hasFinish = true
			return d.str(once(&seen, 32, i), &v.finish, v.f.finish)
		}
		return unknownKey
	})
}

// modelResponse reads chunk.model_response at d[i:]: metadata.response_id
// and the message's role and content.
func (v *fastChunk) modelResponse(d scan, i int) int {
	var seen, seenMD, seenMsg uint8
	return d.object(i, func(key []byte, i int) int {
		switch string(key) {
		case "metadata":
			return d.object(once(&seen, 1, i), func(key []byte, i int) int {
				if string(key) == "response_id" {
					return d.str(once(&seenMD, 1, i), &v.responseID, v.f.chunk.ModelResponse.Metadata.ResponseID)
				}
				return unknownKey
			})
		case "message":
			return d.object(once(&seen, 2, i), func(key []byte, i int) int {
				switch string(key) {
				case "role":
					return d.str(once(&seenMsg, 1, i), &v.role, v.f.chunk.ModelResponse.Message.Role)
				case "content":
					return d.text(once(&seenMsg, 2, i), &v.content, v.f.chunk.ModelResponse.Message.Content)
				}
				return unknownKey
			})
		}
		return unknownKey
	})
}

// once marks bit in seen and returns i, or -1 when the key came before:
// encoding/json resolves a repeated key by overwriting or merging, which is
// left to it.
func once(seen *uint8, bit uint8, i int) int {
	if *seen&bit != 0 {
		return -1
	}
	*seen |= bit
	return i
}
